// Text for `testbedctl exercise`: the list, a started lab, a hint, a check's verdict.
// Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "exercise/exercise.h"

namespace tb::report {

std::string exercise_list_text(const std::vector<exercise::Exercise>& all);
std::string exercise_start_text(const exercise::StartReport& r);
std::string exercise_hint_text(const exercise::HintReport& r);
std::string exercise_check_text(const exercise::CheckReport& r);

}  // namespace tb::report
