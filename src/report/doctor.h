// What `doctor` prints for people: the kernel, one row per capability (available, what the
// check saw, what it enables or the fallback without it) and the backends testbedctl would
// choose. The JSON twin is capability::to_json (capability/capabilities.h), next to the data.
// Pure; thread-safe.
#pragma once

#include <string>

#include "capability/capabilities.h"

namespace tb::report {

std::string doctor_text(const capability::DoctorReport& r);

}  // namespace tb::report
