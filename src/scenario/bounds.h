// Internal to the scenario loader: the limits on raw input, checked before toml11 sees a byte.
//
//   file size       at most kMaxFileBytes
//   nesting         at most kMaxNesting open arrays and inline tables at any point
//   key parts       at most kMaxKeyParts parts in one dotted key or table name (a.b.c is 3)
//
// toml11 recurses once per nesting level (about 6,000 levels overflow the stack: SIGSEGV) and
// slows down sharply with very long dotted keys; a scenario needs three or four levels of each.
// Stateless and thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tb::scenario::detail {

inline constexpr size_t kMaxFileBytes = size_t{1} << 20;  // 1 MiB
inline constexpr int kMaxNesting = 32;
inline constexpr int kMaxKeyParts = 32;

// Why `text` (the file `name`) exceeds a limit, as "NAME[:LINE:COL]: ..." at the first place
// that does, or nullopt. Scans bytes: strings and comments are skipped, so a '[' inside a
// string does not count.
std::optional<std::string> exceeds_bounds(std::string_view text, const std::string& name);

}  // namespace tb::scenario::detail
