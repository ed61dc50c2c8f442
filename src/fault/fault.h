// Faults on a live lab: a scenario [[fault]] (or the `fault` verb's flags, turned into one)
// resolved against the lab's topology, expanded into timed steps, and applied. The kinds and
// their names are scenario::FaultKind (scenario/fault_kind.h); what each does here:
//
//   link-down / link-up   carrier off/on at both ends (routes through it go and come back)
//                         (on a lab over several hosts, every kind acts on this host's part:
//                         link_ops.h EndsHere)
//   flap                  `count` cycles of down for period/2, up for period/2
//   loss                  the link's loss set to `loss` %, back to its figure after `for`
//   latency               `delay` added to the link's one-way delay for `for`
//   blackhole             everything dropped both ways while the link stays up (gray failure)
//   partition             every WAN link between two regions blackholed
//   node-crash            every link of a ToR, spine, switch, server or router down
//   rank-kill             SIGKILL to the bench ranks running in a GPU's namespace
//   pfc-storm             the ToR port(s) facing a GPU held paused, as if its NIC kept sending
//                         PFC pauses (lossless rails only): the lab's congestion agent holds them
//                         (lab/storm.h) and its watchdog mitigates; revert releases them
// A fault with `for` > 0 is reverted after it; with 0 it stays (link-down until a later
// link-up). Resolving and scheduling are pure (unit-tested); Injector touches the lab.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apply/kernel.h"
#include "lab/state.h"
#include "scenario/model.h"

namespace tb::fault {

struct Resolved {
  scenario::Fault spec;
  std::vector<size_t> links;  // topology link indices it acts on
  std::string netns;          // rank-kill: the GPU's namespace
  std::string label;          // "blackhole hz/tr:ec <-> bj/tr:ec"
  // On a lab over several hosts: what of it is another host's (link_ops.h EndsHere::elsewhere),
  // one line per link this host holds only one end of; empty when it is all here.
  std::vector<std::string> elsewhere;
  // pfc-storm: the congestion agent's ports it holds ("dc/tor0:s0g0", one per ToR facing it).
  std::vector<std::string> ports;
};

// Exit-2 errors name the fault and what would be valid. On one host of a lab over several
// (lab state's host) a fault acts on this host's part: a link's ends here (a cross-host link's
// one end, the tunnel's), a partition's WAN links with an end here; a fault on a link or node
// wholly on another host, or a partition with no WAN link here, is exit 2 naming that host.
Result<Resolved> resolve(const lab::LabState& st, const scenario::Fault& f);

struct Step {
  int64_t at_ns = 0;   // from the start of the timeline
  size_t fault = 0;    // index into the resolved faults
  bool inject = true;  // false: revert
  int cycle = -1;      // flap: which cycle
};
// Every step of every fault, in time order (stable for equal times: injects before reverts
// of the same fault never happen at one instant since durations are > 0).
std::vector<Step> schedule(const std::vector<Resolved>& faults);

// Applies and reverts steps, remembering what a revert must restore (a link's figures before
// a loss or latency fault). Emits fault_inject / fault_revert events.
class Injector {
 public:
  Injector(lab::LabState& st, apply::Kernel& kernel) : st_(st), kernel_(kernel) {}
  Status apply(const Resolved& f, const Step& s);
  // Reverts whatever is still in force (on interrupt or at the end of a run), in reverse.
  void revert_all(const std::vector<Resolved>& faults);
  // Leaves the faults without a duration (for = 0) in force: revert_all no longer reverts them.
  void keep_lasting(const std::vector<Resolved>& faults);
  // When the last applied step first took effect (its event's effective_ns).
  int64_t last_effective_ns() const { return last_effective_ns_; }

 private:
  Status inject(const Resolved& f, size_t id);
  Status revert(const Resolved& f, size_t id);
  lab::LabState& st_;
  apply::Kernel& kernel_;
  std::vector<std::pair<size_t, std::vector<plan::EmulatedFigures>>> saved_;  // fault -> figures
  std::vector<size_t> active_;  // faults injected and not reverted
  int64_t effect_ns_ = 0;       // when the step being applied first took effect
  int64_t last_effective_ns_ = 0;
};

}  // namespace tb::fault
