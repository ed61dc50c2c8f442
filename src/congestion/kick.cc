#include "congestion/kick.h"

#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstring>
#include <string>

#include "netlink/netns.h"

namespace tb::congestion {

PfcFrame pfc_frame(const std::array<uint8_t, 6>& src, uint8_t class_enable,
                   const std::array<uint16_t, 8>& quanta) {
  PfcFrame f{};
  std::memcpy(f.data(), kPfcDest.data(), 6);
  std::memcpy(f.data() + 6, src.data(), 6);
  f[12] = kEthMacControl >> 8;
  f[13] = kEthMacControl & 0xFF;
  f[14] = kPfcOpcode >> 8;
  f[15] = kPfcOpcode & 0xFF;
  f[16] = 0;  // the class-enable vector's high byte is reserved
  f[17] = class_enable;
  for (size_t i = 0; i < quanta.size(); ++i) {
    f[18 + 2 * i] = static_cast<uint8_t>(quanta[i] >> 8);
    f[19 + 2 * i] = static_cast<uint8_t>(quanta[i] & 0xFF);
  }
  return f;  // the rest is padding, zero
}

PfcFrame pfc_xon(const std::array<uint8_t, 6>& src) {
  return pfc_frame(src, 0xFF, {});
}

Result<Kicker> Kicker::open(int netns_fd, int ifindex) {
  auto in = netlink::ScopedNetns::enter(netns_fd);
  if (!in) return std::unexpected(in.error());
  UniqueFd fd(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));
  if (!fd) return sys_fail("AF_PACKET socket for the kick");
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_ifindex = ifindex;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) < 0)
    return sys_fail("bind the kick's AF_PACKET socket to ifindex " + std::to_string(ifindex));
  ifreq ifr{};
  if (!::if_indextoname(static_cast<unsigned>(ifindex), ifr.ifr_name))
    return sys_fail("ifindex " + std::to_string(ifindex) + ": no such interface");
  if (::ioctl(fd.get(), SIOCGIFHWADDR, &ifr) < 0)
    return sys_fail(std::string("SIOCGIFHWADDR of ") + ifr.ifr_name);
  std::array<uint8_t, 6> mac{};
  std::memcpy(mac.data(), ifr.ifr_hwaddr.sa_data, mac.size());
  Kicker k;
  k.fd_ = std::move(fd);
  k.frame_ = pfc_xon(mac);
  return k;
}

Status Kicker::kick() const {
  const ssize_t n = ::send(fd_.get(), frame_.data(), frame_.size(), 0);
  if (n == static_cast<ssize_t>(frame_.size())) return {};
  if (n < 0) return sys_fail("send the XON kick");
  return fail("send the XON kick: " + std::to_string(n) + " of " + std::to_string(frame_.size()) +
              " bytes sent");
}

}  // namespace tb::congestion
