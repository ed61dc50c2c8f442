// Rtnetlink request builders (STYLE rule 7: a message is built apart from sending it).
//
// Each builder returns the complete bytes of one request, with nlmsg_seq = 0 and without
// NLM_F_ACK: NlSocket::send adds both in one place. Builders make no system calls, so their
// bytes are checked in tests/unit/netlink_msg_test.cc without root.
//
// Interfaces are named by ifindex inside the namespace the request is sent in (the caller
// tracks them; see apply/netlink_kernel.h). ifindex 0 on a create lets the kernel choose; a
// nonzero one is honoured (net/core/rtnetlink.c rtnl_newlink_create: dev->ifindex =
// ifm->ifi_index; drivers/net/veth.c veth_newlink: the peer's ifi_index is honoured when the
// first end's is nonzero).
//
// Plain values and pure functions; thread-safe.
#pragma once

#include <linux/netlink.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/ipv4.h"

namespace tb::netlink {

// lo is always ifindex 1 in every namespace (include/net/flow.h LOOPBACK_IFINDEX;
// drivers/net/loopback.c loopback_net_init BUG_ONs otherwise).
inline constexpr int kLoopbackIfindex = 1;

// One request: a single nlmsghdr and its payload.
struct NlMsg {
  std::vector<uint8_t> bytes;

  nlmsghdr* header() { return reinterpret_cast<nlmsghdr*>(bytes.data()); }
  const nlmsghdr* header() const { return reinterpret_cast<const nlmsghdr*>(bytes.data()); }
};

// One end of a veth pair as it is created.
struct VethEndSpec {
  std::string_view ifname;  // <= 15 characters
  int ifindex = 0;          // in the end's own namespace; 0 = kernel's choice
  int netns_fd = -1;        // IFLA_NET_NS_FD: the namespace it is created in; -1 = sender's
};

// RTM_NEWLINK kind "veth" with the given MTU: `a` is the link itself, created up; `b` goes in
// IFLA_LINKINFO/IFLA_INFO_DATA/VETH_INFO_PEER and is created down (the kernel cannot open a
// peer before the pair is tied: veth_open returns ENOTCONN). a_master, if nonzero, is
// IFLA_MASTER for `a`; the kernel ignores IFLA_MASTER and IFLA_IFALIAS for the peer, so `b`'s
// up, alias and master follow in one set_link().
NlMsg new_veth(const VethEndSpec& a, const VethEndSpec& b, int mtu, int a_master = 0);

// RTM_NEWLINK kind "vxlan", sent from the underlay's namespace: the device is created down in
// the namespace `netns_fd` names (IFLA_NET_NS_FD) with index `ifindex` there, while its UDP
// socket stays in the sender's namespace (drivers/net/vxlan: the device's net is the request's
// source net), unicast to `remote` from `local` on UDP port `port`, VNI `vni`. Up, alias and
// master follow in one set_link() in its namespace, as for a veth's peer.
struct VxlanSpec {
  std::string_view ifname;
  int ifindex = 0;
  int netns_fd = -1;
  uint32_t vni = 0;
  Ipv4 local, remote;
  uint16_t port = 4789;
  int mtu = 1450;
};
NlMsg new_vxlan(const VxlanSpec& v);

// RTM_NEWLINK kind "bridge", created up with the given MTU.
NlMsg new_bridge(std::string_view ifname, int ifindex, int mtu);

// What RTM_NEWLINK (without NLM_F_CREATE) changes on an existing link. Unset fields are left.
struct LinkChange {
  int ifindex = 0;
  std::optional<bool> up;                 // ifi_flags/ifi_change IFF_UP
  std::optional<std::string_view> alias;  // IFLA_IFALIAS (<= 255 bytes)
  std::optional<int> master;              // IFLA_MASTER; 0 = release from its bridge
  std::optional<int> mtu;                 // IFLA_MTU
};
NlMsg set_link(const LinkChange& change);

// RTM_DELLINK by ifindex, or by name when ifindex is 0. Deleting a veth end deletes both.
NlMsg del_link(int ifindex, std::string_view ifname = {});

// RTM_NEWADDR / RTM_DELADDR: an IPv4 address with its prefix length on an interface.
// `noprefixroute`: IFA_F_NOPREFIXROUTE, no kernel route for the address's subnet (the caller
// adds its own).
NlMsg new_addr(int ifindex, Prefix addr, bool noprefixroute = false);
NlMsg del_addr(int ifindex, Prefix addr);

struct RouteNexthop {
  int ifindex = 0;
  std::optional<Ipv4> via;  // RTA_GATEWAY
  bool onlink = false;      // RTNH_F_ONLINK: gateway is on the link even without a subnet
  int weight = 1;           // rtnh_hops + 1 (multipath only)
};
struct RouteSpec {
  Prefix dst;
  std::vector<RouteNexthop> nexthops;  // one = RTA_OIF/RTA_GATEWAY, more = RTA_MULTIPATH
  std::optional<Ipv4> src;             // RTA_PREFSRC
  uint32_t metric = 0;                 // RTA_PRIORITY
  std::string congctl;                 // RTA_METRICS RTAX_CC_ALGO ("" = none)
};
// RTM_NEWROUTE in the main table, protocol static, unicast.
NlMsg new_route(const RouteSpec& route);
// The same, replacing a route with the same dst and metric if there is one (`ip route replace`).
NlMsg replace_route(const RouteSpec& route);
// RTM_DELROUTE for dst + metric in the main table, any nexthops (as `ip route del` does).
NlMsg del_route(Prefix dst, uint32_t metric);

// RTM_GETROUTE with RTM_F_FIB_MATCH (`ip route get fibmatch DST`): the kernel answers with the
// route a packet to `dst` leaving this namespace would take now.
NlMsg get_route(Ipv4 dst);

// Dumps and link gets are libnl-route's requests now (netlink/dump.h).

}  // namespace tb::netlink
