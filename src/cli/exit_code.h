// How a verb ends on an error: "testbedctl: <message>" on stderr and the error's exit code
// (core/error.h: 1 failed, 2 bad input or environment). A message that starts with its own place,
// "FILE:LINE:COL: " (the scenario loader's, one such line per problem), is printed as it is, as
// compilers do, so that every line of it has the same form. Stateless.
#pragma once

#include <cctype>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "lab/up.h"

namespace tb::cli {

// Whether `m` starts with "FILE:LINE:COL: " (LINE and COL digits, FILE without ": ").
inline bool starts_with_place(std::string_view m) {
  const size_t end = m.find(": ");
  if (end == std::string_view::npos) return false;
  std::string_view head = m.substr(0, end);
  for (int part = 0; part < 2; ++part) {  // COL, then LINE
    size_t colon = head.rfind(':');
    if (colon == std::string_view::npos || colon + 1 == head.size()) return false;
    for (char c : head.substr(colon + 1))
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    head = head.substr(0, colon);
  }
  return !head.empty();
}

// What report() prints, without the final newline.
inline std::string report_text(const Error& e) {
  return starts_with_place(e.message) ? e.message : "testbedctl: " + e.message;
}

inline int report(const Error& e) {
  std::fprintf(stderr, "%s\n", report_text(e).c_str());
  return e.exit_code;
}

// Exit code 2 with a clear message unless we run as root (lab::require_root).
inline std::optional<int> require_root(const std::string& verb) {
  if (auto r = lab::require_root(verb); !r) return report(r.error());
  return std::nullopt;
}

}  // namespace tb::cli
