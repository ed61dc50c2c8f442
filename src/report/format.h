// The formatting helpers report/'s renderers share: text columns padded by bytes (fmt pads by
// display width, which would shift a column holding UTF-8) and the "-" of a figure that was not
// measured. Numbers are formatted with fmt (fmt::format) where they are printed; no room below
// report/ needs these helpers, so they live here rather than in core/. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace tb::report {

// `s` padded with spaces to at least `width` bytes; longer text overflows the column.
inline std::string pad(std::string_view s, size_t width) {
  std::string out(s);
  if (out.size() < width) out.append(width - out.size(), ' ');
  return out;
}

// A table cell: `s` padded to `width` bytes, then the one space that separates columns.
inline std::string cell(std::string_view s, size_t width) {
  return pad(s, width) + " ";
}

// `v` with one decimal ("12.3"), or "-" when there is no figure.
inline std::string one_decimal_or_dash(const std::optional<double>& v) {
  return v ? fmt::format("{:.1f}", *v) : std::string("-");
}

}  // namespace tb::report
