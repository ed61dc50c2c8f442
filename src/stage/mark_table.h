// ECN marking without RED (docs/design-congestion.md section 4): the host's mark table, shared
// between the congestion agent and the delay stages, and the packet arithmetic of a CE mark.
//
// The table is a file in /dev/shm (plan::mark_table_path: testbedctl.<lab>.congestion, removed
// by `down`), mapped by both sides: a header and kMarkSlots slots, one per ecn switch port of the
// host (the plan numbers them). Each poll the agent writes the port's marking probability into
// its slot (mark_probability of the backlog it read); the stage queue just downstream of that port
// reads it for each packet it takes, marks an ECT packet CE with that probability and counts
// what it saw in the same slot, which the agent reports as the port's CE marks. One writer per
// field (the agent: p; the one stage serving the slot: the counts), relaxed atomics: a reader may
// see a probability one poll old, which the agent's poll already makes it. Either side may create
// the file; both size it the same, so the first one's size holds.
//
// The packet side is pure: is_ect reads the ECN field of an IPv4 header, set_ce writes CE (0b11)
// and fixes the header checksum incrementally (RFC 1624, eqn. 3). The TCP/UDP checksum does not
// cover the TOS byte, so nothing else changes.
//
// MarkTable owns its mapping (move-only); its accessors are thread- and process-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/error.h"
#include "stage/queue_spec.h"

namespace tb::stage {

inline constexpr uint32_t kMarkMagic = 0x4b4d4254;  // "TBMK"
inline constexpr uint32_t kMarkVersion = 1;
// The probability that marks every ECT packet (p is a fraction of 2^32 otherwise).
inline constexpr uint32_t kMarkAlways = 0xffffffffu;

// The marking probability of a port holding `backlog` bytes, as DCQCN's RED-like curve: 0 up to
// kmin, pmax x (backlog - kmin) / (kmax - kmin) up to kmax, 1 (kMarkAlways) above kmax. pmax in
// 0..1. Fixed point: a fraction of 2^32.
uint32_t mark_probability(uint64_t backlog, uint64_t kmin, uint64_t kmax, double pmax);
// Whether a draw `rnd` (uniform over 32 bits) marks at probability `p`.
inline bool marks(uint32_t p, uint32_t rnd) {
  return p == kMarkAlways || rnd < p;
}

// The ECN field (RFC 3168) of the IPv4 packet `ip` (its first byte the version/IHL): 0 Not-ECT,
// 1 ECT(1), 2 ECT(0), 3 CE; -1 when it is not an IPv4 header of at least 20 bytes.
int ecn_field(std::span<const uint8_t> ip);
inline bool is_ect(std::span<const uint8_t> ip) {
  const int f = ecn_field(ip);
  return f == 1 || f == 2;
}
// Sets CE on an ECT IPv4 packet and updates its header checksum (RFC 1624); false (nothing
// changed) when it is not ECT (Not-ECT must not be marked; CE already is).
bool set_ce(std::span<uint8_t> ip);
// The IPv4 header checksum of `ip` computed in full (for tests and checks): 0 when valid.
uint16_t ipv4_header_sum(std::span<const uint8_t> ip);

struct MarkCounts {
  uint64_t ect = 0;      // ECT packets the stage took from this port
  uint64_t ce = 0;       // ... that it marked CE
  uint64_t not_ect = 0;  // Not-ECT (and CE-already) packets: passed unmarked
};

class MarkTable {
 public:
  // Maps `path`, creating it when absent (mode 0600).
  static Result<MarkTable> open(const std::string& path);
  MarkTable(MarkTable&& o) noexcept;
  MarkTable& operator=(MarkTable&& o) noexcept;
  MarkTable(const MarkTable&) = delete;
  MarkTable& operator=(const MarkTable&) = delete;
  ~MarkTable();

  // Slots out of range read as 0 and are not written.
  uint32_t probability(int slot) const;
  void set_probability(int slot, uint32_t p);
  void count(int slot, bool ect, bool marked);
  MarkCounts counts(int slot) const;

 private:
  MarkTable(void* base, size_t size) : base_(base), size_(size) {}
  struct Slot;
  Slot* slot(int i) const;
  void* base_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tb::stage
