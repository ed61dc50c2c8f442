// How a verb ends on an error: "testbedctl: <message>" on stderr and the error's exit code
// (core/error.h: 1 failed, 2 bad input or environment). Stateless.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "core/error.h"
#include "lab/up.h"

namespace tb::cli {

inline int report(const Error& e) {
  std::fprintf(stderr, "testbedctl: %s\n", e.message.c_str());
  return e.exit_code;
}

// Exit code 2 with a clear message unless we run as root (lab::require_root).
inline std::optional<int> require_root(const std::string& verb) {
  if (auto r = lab::require_root(verb); !r) return report(r.error());
  return std::nullopt;
}

}  // namespace tb::cli
