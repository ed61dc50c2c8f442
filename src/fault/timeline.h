// Running a fault timeline: each step at its offset from `t0_ns` on CLOCK_MONOTONIC (the
// clock of events.jsonl), in time order — a revert no earlier than its fault's duration after
// the inject took effect (so a fault holds at least its `for` even when its inject was in force
// a few ms after it was due; the injects keep to the schedule, so nothing drifts) — keeping going
// past a step that fails (reported via on_step and returned at the end). When `stop` is set
// (Ctrl-C, or the run's workload ended) it stops early and reverts whatever is still in force. When
// the last step has run, what is still in force is reverted too (`run`: the lab ends as it began),
// or, with kKeepLasting (the `fault` verb), faults without a duration stay: `fault LAB link-down A
// B` leaves the link down until a `link-up`. Not thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "fault/fault.h"

namespace tb::fault {

enum class AtEnd { kRevertAll, kKeepLasting };

Status run_timeline(Injector& injector, const std::vector<Resolved>& faults,
                    const std::vector<Step>& steps, int64_t t0_ns, const std::atomic<bool>& stop,
                    const std::function<void(const Step&, const Status&)>& on_step,
                    AtEnd at_end = AtEnd::kRevertAll);

}  // namespace tb::fault
