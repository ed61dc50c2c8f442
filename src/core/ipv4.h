// IPv4 addresses and prefixes as plain values (host byte order inside).
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace tb {

struct Ipv4 {
  uint32_t value = 0;  // host byte order
  friend auto operator<=>(const Ipv4&, const Ipv4&) = default;
  std::string to_string() const;
  uint32_t network_order() const;
};

struct Prefix {
  Ipv4 addr;
  int len = 32;
  friend auto operator<=>(const Prefix&, const Prefix&) = default;

  uint32_t mask() const { return len == 0 ? 0 : ~uint32_t{0} << (32 - len); }
  Prefix network() const { return Prefix{Ipv4{addr.value & mask()}, len}; }
  uint64_t size() const { return uint64_t{1} << (32 - len); }
  bool contains(Ipv4 a) const { return (a.value & mask()) == (addr.value & mask()); }
  bool overlaps(const Prefix& o) const {
    int l = len < o.len ? len : o.len;
    uint32_t m = l == 0 ? 0 : ~uint32_t{0} << (32 - l);
    return (addr.value & m) == (o.addr.value & m);
  }
  std::string to_string() const;  // "198.18.0.1/31"
};

Result<Ipv4> parse_ipv4(std::string_view text);
// "198.18.0.0/15"; a bare address is a /32.
Result<Prefix> parse_prefix(std::string_view text);

}  // namespace tb
