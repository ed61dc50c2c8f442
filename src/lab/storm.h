// Holding a lab's switch ports paused from outside (a `pfc-storm` fault, docs/design-congestion.md
// §6): the lab's congestion agent is told through its control document (congestion/control.h,
// `<lab dir>/stages/congestion.control.json`): the next generation, with the storm ports added
// or removed, is written atomically, the agent is sent SIGHUP (its pid from the supervisor's
// status), and its answer for that generation is awaited in its stats file (at most 5 s).
// Callers hold the lab's lock (one writer of the document at a time). Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace tb::lab {

// Holds (on) or releases (off) `ports` ("node:ifname", the agent's port names); returns when the
// agent carried it out (its control_applied_ns, CLOCK_MONOTONIC). Errors: no agent running in
// the lab, no answer within 5 s, or the agent's refusal (its control_error).
Result<int64_t> set_storms(const std::string& lab, const std::vector<std::string>& ports, bool on);

}  // namespace tb::lab
