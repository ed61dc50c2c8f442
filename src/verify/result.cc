#include "verify/result.h"

namespace tb::verify {

bool ClassResult::failed() const {
  if (!outcome.errors.empty()) return true;
  for (const auto& c : checks)
    if (c.verdict == Verdict::kFail) return true;
  return false;
}

bool PathResult::failed() const {
  return !errors.empty() || !outcome.errors.empty() || check.verdict == Verdict::kFail;
}

bool measure_again(const std::vector<Check>& checks, const MeasureOutcome& outcome) {
  if (!outcome.errors.empty()) return false;
  for (const auto& c : checks)
    if (c.verdict == Verdict::kFail) return true;
  return false;
}

bool measure_again(const PathCheck& check, const MeasureOutcome& outcome) {
  return outcome.errors.empty() && check.verdict == Verdict::kFail;
}

bool VerifyReport::passed() const {
  if (interrupted || !load_errors.empty()) return false;
  if (paths_mode) {
    if (paths.empty()) return false;
    for (const auto& p : paths)
      if (p.failed()) return false;
    return true;
  }
  if (classes.empty()) return false;
  for (const auto& c : classes)
    if (c.failed()) return false;
  return true;
}

}  // namespace tb::verify
