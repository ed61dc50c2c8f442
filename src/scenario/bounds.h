// Internal to the scenario loader: the limits on raw input, checked before toml11 sees a byte.
//
//   file size       at most kMaxFileBytes
//   encoding        well-formed UTF-8 (toml11 reads past its buffer on some invalid bytes)
//   nesting         at most kMaxNesting open arrays and inline tables at any point
//   key parts       at most kMaxKeyParts parts in one dotted key or table name (a.b.c is 3)
//   values per line at most kMaxLineItems of '=', ',', '[', ']', '{', '}' on one line (outside
//                   strings and comments): every value starts after one of them, and a value
//                   that spans lines ends with one
//
// and, once the regions are read, the lab's size:
//
//   namespaces      at most kMaxNamespaces in the whole lab
//
// toml11 recurses once per nesting level (about 6,000 levels overflow the stack: SIGSEGV) and
// slows down sharply with very long dotted keys; a scenario needs three or four levels of each.
// toml11 3.7.1 also reads each value's comments (region::comments(), even when it discards
// them) by scanning the value's whole line, so its time grows with the square of the values on
// a line: 32,000 on one line took 1.4 s, 500,000 (1 MiB) minutes (found by tests/fuzz). With at
// most kMaxLineItems per line the scans of a file add up to at most kMaxLineItems times its size.
// Stateless and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "scenario/model.h"

namespace tb::scenario::detail {

inline constexpr size_t kMaxFileBytes = size_t{1} << 20;  // 1 MiB
inline constexpr int kMaxNesting = 32;
inline constexpr int kMaxKeyParts = 32;
inline constexpr int kMaxLineItems = 256;

// The most network namespaces one lab may have (one per GPU, server, ToR, spine, VPC switch and
// transit router). The planner's work and the lab's hosts files grow with its square (every
// namespace's hosts file names every node); unbounded, a scenario of absurd size (1023 servers x
// 64 GPUs x many regions) stalled `validate` and `plan` (found by tests/fuzz).
inline constexpr int kMaxNamespaces = 4096;
// The namespaces a region's nodes take: transit router, VPC switch, spines, ToRs (two per rail
// with dual_tor), servers and GPUs.
int64_t region_namespaces(const Region& r);

// Why `text` (the file `name`) exceeds a limit, as "NAME[:LINE:COL]: ..." at the first place
// that does, or nullopt. Scans bytes: strings and comments are skipped, so a '[' inside a
// string does not count.
std::optional<std::string> exceeds_bounds(std::string_view text, const std::string& name);

}  // namespace tb::scenario::detail
