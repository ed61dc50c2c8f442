// The congestion agent's idle wake (docs/design-congestion.md §3.6): a byte counter on every
// polled switch port, kept by the kernel, that the agent reads from memory instead of dumping
// every switch namespace's qdiscs while no queue builds.
//
// One BPF array map of one element, `ports` u64 slots wide, created BPF_F_MMAPABLE and mapped
// into the agent; per port one BPF_PROG_TYPE_SCHED_CLS program of five instructions that adds
// the packet's length (skb->len) to its slot (an atomic add on the slot's address, loaded as a
// BPF_PSEUDO_MAP_VALUE) and returns TC_ACT_UNSPEC (the packet goes on, untouched). The agent
// hangs each program on its port's clsact egress hook, which runs before the root qdisc's
// enqueue (net/core/dev.c sch_handle_egress), so a slot counts every byte offered to that
// port's TBF, dropped ones included.
//
// Why it is enough: a queue's backlog grows only by what is offered to it, so a port whose
// backlog was B at a poll holds at most B + (its slot's growth since just before that poll).
// While that stays below the port's fast threshold (PauseMachine::wake_headroom), no poll could
// change a decision, and none is made.
//
// Needs CAP_BPF and CAP_NET_ADMIN in the host's user namespace (root; a rootless lab's agent has
// neither: kernel.unprivileged_bpf_disabled, and SCHED_CLS programs are never unprivileged),
// BPF_F_MMAPABLE (Linux 5.5) and BPF_PSEUDO_MAP_VALUE (5.2). Where any is missing, create()
// says why and the agent polls every idle period as before.
//
// Not thread-safe to create; bytes() may be read from any thread.
#pragma once

#include <linux/bpf.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"

namespace tb::congestion {

// The cls_bpf filter's name, priority and handle on a port's clsact egress.
inline constexpr const char* kWakeFilterName = "tb-congestion-wake";
inline constexpr uint16_t kWakeFilterPrio = 1;
inline constexpr uint32_t kWakeFilterHandle = 1;

// The program counting into byte offset `offset` of the map `map_fd`'s only value (pure: the
// instructions, for the tests).
std::vector<bpf_insn> count_program(int map_fd, uint32_t offset);

class ByteCounters {
 public:
  // The map and one program per port; an error (with the kernel's reason) where the host lacks
  // what it needs.
  static Result<ByteCounters> create(size_t ports);

  ByteCounters() = default;
  ByteCounters(ByteCounters&& o) noexcept;
  ByteCounters& operator=(ByteCounters&& o) noexcept;
  ByteCounters(const ByteCounters&) = delete;
  ByteCounters& operator=(const ByteCounters&) = delete;
  ~ByteCounters();

  size_t size() const { return programs_.size(); }
  // The program to attach on port `i`'s egress (new_bpf_filter's fd).
  int program_fd(size_t i) const { return programs_[i].get(); }
  // Bytes offered to port `i` since the map was made (a counter).
  uint64_t bytes(size_t i) const;

 private:
  UniqueFd map_;
  std::vector<UniqueFd> programs_;
  void* mem_ = nullptr;
  size_t mem_len_ = 0;
};

}  // namespace tb::congestion
