#include "capability/underlay.h"

#include <cerrno>

#include "netlink/dump.h"
#include "netlink/socket.h"

namespace tb::capability {

Status check_underlay(const std::string& host, Ipv4 local, const std::vector<UnderlayPeer>& peers) {
  auto sock = netlink::NlSocket::open();
  if (!sock) return std::unexpected(sock.error());
  auto addrs = netlink::list_ipv4_addrs(*sock, "this host's namespace");
  if (!addrs) return std::unexpected(addrs.error());
  bool mine = false;
  for (const auto& a : *addrs) mine = mine || a.addr.addr.value == local.value;
  if (!mine)
    return bad_input("--host " + host + ": this machine has no address " + local.to_string() +
                     " (host " + host +
                     "'s underlay in the scenario); run up --host with the name of the [[host]] "
                     "whose underlay this machine has, or fix its underlay");
  for (const auto& p : peers) {
    auto r = netlink::lookup_route(*sock, p.addr, "this host's namespace");
    if (!r && (r.error().sys_errno == ENETUNREACH || r.error().sys_errno == EHOSTUNREACH))
      return bad_input("--host " + host + ": host " + p.host + "'s underlay " + p.addr.to_string() +
                       " is unreachable from here (no route); the hosts' underlay addresses "
                       "must reach each other");
    if (!r) return std::unexpected(r.error());
    if (p.mtu_needed <= 0) continue;
    // The path's MTU: the route's own mtu metric, else the narrowest output device of its next
    // hops.
    int mtu = r->mtu;
    std::string dev;
    if (mtu <= 0)
      for (const auto& hop : r->hops) {
        auto l = netlink::query_link(*sock, hop.ifindex, "this host's namespace");
        if (!l) return std::unexpected(l.error());
        if (mtu <= 0 || l->mtu < mtu) {
          mtu = l->mtu;
          dev = l->name;
        }
      }
    if (mtu <= 0 || mtu >= p.mtu_needed) continue;
    const std::string via =
        dev.empty() ? "the route to it has mtu " + std::to_string(mtu)
                    : "the route to it leaves through " + dev + " with MTU " + std::to_string(mtu);
    return bad_input("--host " + host + ": " + p.mtu_for + " crosses to host " + p.host +
                     " in a VXLAN tunnel whose packets are " + std::to_string(p.mtu_needed) +
                     " bytes on the underlay (the tunnel's MTU " +
                     std::to_string(p.mtu_needed - 50) + " + 50 bytes of encapsulation), but " +
                     via + " (host " + p.host + "'s underlay " + p.addr.to_string() +
                     "): raise the underlay's MTU to " + std::to_string(p.mtu_needed) +
                     " or more on every NIC and switch port between the hosts, or give the link "
                     "a profile with mtu <= " +
                     std::to_string(mtu) + "; nothing was built");
  }
  return {};
}

}  // namespace tb::capability
