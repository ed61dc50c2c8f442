#include "core/error.h"

#include <cerrno>
#include <cstring>

namespace tb {

std::unexpected<Error> sys_fail(const std::string& what, int e) {
  // A read-only or full file system is the host's environment, not a failed check: exit 2,
  // like every other "this machine cannot" (no root, a missing program).
  const bool environment = e == EROFS || e == ENOSPC || e == EDQUOT;
  return std::unexpected(
      Error{what + ": " + std::strerror(e), e, environment ? kExitBadInput : kExitFailed});
}

void check_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "testbedctl: internal error: check failed: %s at %s:%d\n", expr, file, line);
  std::abort();
}

}  // namespace tb
