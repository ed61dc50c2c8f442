// What `verify` prints: per link class, the link and address measured, how (probe counts,
// sizes, durations, buffers), and configured vs expected vs achieved with the error, the
// accepted range and the verdict of each check; a table for people and its JSON twin.
// The results themselves are verify/result.h's. Pure functions of the results; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "verify/result.h"

namespace tb::report {

std::string verify_text(const verify::VerifyReport& r);
nlohmann::json verify_json(const verify::VerifyReport& r);

}  // namespace tb::report
