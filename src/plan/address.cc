#include "plan/address.h"

namespace tb::plan {

int prefix_len_for(uint64_t n) {
  int len = 32;
  while (len > 0 && (uint64_t{1} << (32 - len)) < n) --len;
  return len;
}

Result<Prefix> AddressAllocator::allocate(uint64_t n, const std::string& purpose) {
  int len = prefix_len_for(n);
  uint64_t size = uint64_t{1} << (32 - len);
  uint64_t start = (next_ + size - 1) / size * size;
  uint64_t end = uint64_t{space_.addr.value} + space_.size();
  if (start + size > end)
    return bad_input("address_space " + space_.to_string() + " is too small: it ran out at " +
                     purpose + " after " + std::to_string(used()) +
                     " addresses; give a larger prefix (e.g. 198.18.0.0/15)");
  next_ = start + size;
  return Prefix{Ipv4{static_cast<uint32_t>(start)}, len};
}

}  // namespace tb::plan
