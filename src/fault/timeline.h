// Running a fault timeline: each step at its offset from `t0_ns` on CLOCK_MONOTONIC (the
// clock of events.jsonl), in time order, keeping going past a step that fails (reported via
// on_step and returned at the end). When `stop` is set (Ctrl-C, or the run's workload ended)
// it stops early and reverts whatever is still in force. Not thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "fault/fault.h"

namespace tb::fault {

Status run_timeline(Injector& injector, const std::vector<Resolved>& faults,
                    const std::vector<Step>& steps, int64_t t0_ns, const std::atomic<bool>& stop,
                    const std::function<void(const Step&, const Status&)>& on_step);

}  // namespace tb::fault
