// AddressAllocator: deterministic, aligned bump allocation of prefixes from the lab's space.
// Each request is rounded up to a power of two and aligned to its size, so every block is a
// valid prefix that routes can name. Not thread-safe (one per compile).
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/ipv4.h"

namespace tb::plan {

// Smallest prefix length whose block holds at least `n` addresses.
int prefix_len_for(uint64_t n);

class AddressAllocator {
 public:
  explicit AddressAllocator(Prefix space) : space_(space.network()), next_(space_.addr.value) {}

  // A block of at least `n` addresses; fails when the space is exhausted.
  Result<Prefix> allocate(uint64_t n, const std::string& purpose);
  uint64_t used() const { return uint64_t{next_} - space_.addr.value; }

 private:
  Prefix space_;
  uint64_t next_;
};

// The i-th address inside a prefix, with the prefix's own length ("198.18.0.9/24").
inline Prefix nth(const Prefix& p, uint32_t i) {
  return Prefix{Ipv4{p.addr.value + i}, p.len};
}
inline Ipv4 nth_addr(const Prefix& p, uint32_t i) {
  return Ipv4{p.addr.value + i};
}
inline Prefix host(const Prefix& p, uint32_t i) {
  return Prefix{Ipv4{p.addr.value + i}, 32};
}

}  // namespace tb::plan
