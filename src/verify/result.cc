#include "verify/result.h"

namespace tb::verify {

bool ClassResult::failed() const {
  if (!outcome.errors.empty()) return true;
  for (const auto& c : checks)
    if (c.verdict == Verdict::kFail) return true;
  return false;
}

bool VerifyReport::passed() const {
  if (interrupted || classes.empty()) return false;
  for (const auto& c : classes)
    if (c.failed()) return false;
  return true;
}

}  // namespace tb::verify
