// The `fault` verb's kernel side: one resolved fault injected into a live lab and reverted on
// its schedule (timeline.h), or at once when `stop` is set; one without a duration stays in
// force after the call (AtEnd::kKeepLasting). Every step is an event and is
// reported to `on_step` with its time in seconds from the start. The caller has checked root
// and holds the lab lock. Not thread-safe.
#pragma once

#include <atomic>
#include <functional>

#include "core/error.h"
#include "fault/fault.h"
#include "lab/state.h"

namespace tb::fault {

struct ByHandReport {
  bool all_applied = true;  // false: a step failed (on_step got its error)
};

using OnStep = std::function<void(const Step& s, const Status& r, double seconds)>;

Result<ByHandReport> inject_by_hand(lab::LabState& st, const Resolved& fault,
                                    const std::atomic<bool>& stop, const OnStep& on_step);

}  // namespace tb::fault
