// The lab's event log: one JSON object per line, appended with O_APPEND (so writers in several
// processes interleave whole lines), each stamped on the one monotonic clock every analysis
// uses (CLOCK_MONOTONIC, ns) and with wall time for people (Unix ms).
// Thread-safe: each call is a single write(2).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/error.h"

namespace tb {

// Adds "t_mono_ns" and "t_unix_ms" to `event` and appends it as one line.
Status append_event(const std::string& path, nlohmann::json event);

}  // namespace tb
