#include "core/error.h"

#include <cstring>

namespace tb {

std::unexpected<Error> sys_fail(const std::string& what, int e) {
  return std::unexpected(Error{what + ": " + std::strerror(e), e, kExitFailed});
}

void check_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "testbedctl: internal error: check failed: %s at %s:%d\n", expr, file, line);
  std::abort();
}

}  // namespace tb
