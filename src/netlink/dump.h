// Reading state back: links (with IFLA_STATS64), qdiscs (TCA_STATS2) and IPv4 addresses of the
// namespace a socket lives in, and route lookups, as plain records.
//
// libnl-route parses: the list_* functions and query_link fill libnl's caches (rtnl_link,
// rtnl_qdisc, rtnl_addr) over the socket's libnl twin in the same namespace
// (NlSocket::libnl_socket), and lookup_route's answer goes through rtnl_route_parse; this file
// copies libnl's objects into the records below. The parse_* functions take one message (a
// dump entry or a get reply) and are pure, unit-tested on hand-built messages. Not thread-safe
// beyond the socket's own rules. Creating objects stays on libmnl (pipelined batches, socket.h).
#pragma once

#include <linux/netlink.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ipv4.h"
#include "netlink/socket.h"

namespace tb::netlink {

struct LinkRecord {
  int ifindex = 0;
  std::string name;
  std::string alias;
  std::string kind;    // IFLA_INFO_KIND ("veth", "bridge"), "loopback" for lo, else ""
  unsigned flags = 0;  // ifi_flags: IFF_UP, IFF_LOWER_UP, ...
  int mtu = 0;
  int master = 0;  // IFLA_MASTER, 0 = none
  uint64_t rx_bytes = 0, tx_bytes = 0;
  uint64_t rx_dropped = 0, tx_dropped = 0;  // the device's own drops (IFLA_STATS64)
};

// A qdisc and its statistics (TCA_STATS2: basic and queue), from an RTM_NEWQDISC message.
struct QdiscRecord {
  int ifindex = 0;
  uint32_t handle = 0, parent = 0;
  std::string kind;  // "tbf", "htb", "netem", "ingress", ...
  uint64_t bytes = 0, packets = 0;
  uint32_t drops = 0, overlimits = 0, qlen = 0, backlog = 0;  // backlog in bytes
};

struct AddrRecord {
  int ifindex = 0;
  Prefix addr;
};

// The route a lookup matched (a get_route reply).
struct RouteMatch {
  int dst_len = 0;
  int oif = 0;       // single-path output interface, 0 when multipath
  int nexthops = 1;  // multipath: how many
  // Every next hop: its output interface and gateway (RTA_OIF/RTA_GATEWAY, or each
  // rtnexthop of RTA_MULTIPATH with its nested RTA_GATEWAY), in the kernel's order.
  struct Hop {
    int ifindex = 0;
    std::optional<Ipv4> via;
  };
  std::vector<Hop> hops;
  std::optional<Ipv4> prefsrc;  // RTA_PREFSRC
  int mtu = 0;                  // RTAX_MTU in RTA_METRICS (`ip route ... mtu N`); 0: none
};

// An RTM_NEWLINK message (a dump entry or a get reply).
std::optional<LinkRecord> parse_link(const nlmsghdr* nlh);
// An RTM_NEWQDISC message (a dump entry).
std::optional<QdiscRecord> parse_qdisc(const nlmsghdr* nlh);
// An RTM_NEWADDR message; nullopt for other families.
std::optional<AddrRecord> parse_ipv4_addr(const nlmsghdr* nlh);

// An RTM_NEWROUTE message of family AF_INET; nullopt for anything else.
std::optional<RouteMatch> parse_route_match(const nlmsghdr* nlh);

// `where` names the namespace for error messages ("netns tb-x-a").
Result<std::vector<LinkRecord>> list_links(NlSocket& sock, const std::string& where);
Result<std::vector<AddrRecord>> list_ipv4_addrs(NlSocket& sock, const std::string& where);
Result<std::vector<QdiscRecord>> list_qdiscs(NlSocket& sock, const std::string& where);
Result<LinkRecord> query_link(NlSocket& sock, int ifindex, const std::string& where);
// The route to `dst` right now (get_route); no route is an error (ENETUNREACH).
Result<RouteMatch> lookup_route(NlSocket& sock, Ipv4 dst, const std::string& where);

}  // namespace tb::netlink
