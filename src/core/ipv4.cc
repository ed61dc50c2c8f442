#include "core/ipv4.h"

#include <arpa/inet.h>

#include <charconv>

namespace tb {

std::string Ipv4::to_string() const {
  return std::to_string(value >> 24) + "." + std::to_string((value >> 16) & 0xff) + "." +
         std::to_string((value >> 8) & 0xff) + "." + std::to_string(value & 0xff);
}

uint32_t Ipv4::network_order() const {
  return htonl(value);
}

std::string Prefix::to_string() const {
  return addr.to_string() + "/" + std::to_string(len);
}

Result<Ipv4> parse_ipv4(std::string_view text) {
  in_addr a{};
  std::string s(text);
  if (inet_pton(AF_INET, s.c_str(), &a) != 1)
    return bad_input("\"" + s +
                     "\" is not an IPv4 address (expected dotted quad, e.g. 198.18.0.1)");
  return Ipv4{ntohl(a.s_addr)};
}

Result<Prefix> parse_prefix(std::string_view text) {
  auto slash = text.find('/');
  auto addr = parse_ipv4(text.substr(0, slash));
  if (!addr) return std::unexpected(addr.error());
  int len = 32;
  if (slash != std::string_view::npos) {
    auto rest = text.substr(slash + 1);
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), len);
    if (ec != std::errc() || p != rest.data() + rest.size() || len < 0 || len > 32)
      return bad_input("\"" + std::string(text) +
                       "\" is not an IPv4 prefix (expected ADDRESS/LEN with LEN 0-32, e.g. "
                       "198.18.0.0/15)");
  }
  return Prefix{*addr, len};
}

}  // namespace tb
