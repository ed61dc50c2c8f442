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
  }
  return {};
}

}  // namespace tb::capability
