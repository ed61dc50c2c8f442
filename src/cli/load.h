// Shared by the verbs: load + validate + compile a scenario, all errors exit code 2.
#pragma once

#include <string>

#include "plan/plan.h"
#include "scenario/loader.h"

namespace tb::cli {

inline Result<plan::Plan> load_and_compile(const std::string& path,
                                           const std::string& lab_override = "") {
  auto s = scenario::load(path);
  if (!s) return std::unexpected(s.error());
  if (!lab_override.empty()) s->lab = lab_override;
  return plan::compile(*s);
}

}  // namespace tb::cli
