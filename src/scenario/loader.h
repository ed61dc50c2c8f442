// scenario::load: reads a TOML scenario file (toml11 v3) into a Scenario and validates it.
//
// Every error is exit-code-2 input error naming file:line:col, the field, and what would be
// valid (closest key for unknown keys, accepted forms for bad units). All errors found are
// reported, not just the first. Thread-safe (no shared state).
#pragma once

#include <string>

#include "core/error.h"
#include "scenario/model.h"

namespace tb::scenario {

Result<Scenario> load(const std::string& path);
// Same, from text; `name` is used as the file name in messages (for tests).
Result<Scenario> load_text(const std::string& text, const std::string& name);

}  // namespace tb::scenario
