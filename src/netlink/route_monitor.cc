#include "netlink/route_monitor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include "core/events.h"
#include "netlink/attr.h"
#include "netlink/netns.h"

namespace tb::netlink {
Result<RouteMonitor> RouteMonitor::open(const std::string& netns) {
  UniqueFd ns(::open(netns_path(netns).c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns) return sys_fail("route monitor: open namespace " + netns);
  auto in = ScopedNetns::enter(ns.get());
  if (!in) return std::unexpected(in.error());
  UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE));
  if (!fd) return sys_fail("route monitor: netlink socket in " + netns);
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_IPV4_ROUTE | RTMGRP_LINK;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return sys_fail("route monitor: subscribe in " + netns);
  int rcv = 1 << 20;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
  return RouteMonitor(std::move(fd), netns);
}

std::vector<RouteChange> RouteMonitor::drain() {
  std::vector<RouteChange> out;
  alignas(nlmsghdr) char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fd_.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) break;
    for (auto& c : parse_route_changes(buf, static_cast<size_t>(n), monotonic_ns())) {
      if (c.is_link) {
        auto it = carrier_.find(c.ifname);
        const bool known = it != carrier_.end();
        // Unknown before: only a loss is news (interfaces start up in a built lab).
        if ((known && it->second == c.carrier) || (!known && c.carrier)) {
          carrier_[c.ifname] = c.carrier;
          continue;
        }
        carrier_[c.ifname] = c.carrier;
      }
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::vector<RouteChange> parse_route_changes(const void* buf, size_t len, int64_t t_ns) {
  std::vector<RouteChange> out;
  const auto* nlh = static_cast<const nlmsghdr*>(buf);
  int left = static_cast<int>(len);
  while (mnl_nlmsg_ok(nlh, left)) {
    if (nlh->nlmsg_type == RTM_NEWLINK) {
      const auto* ifi = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(nlh));
      RouteChange c;
      c.t_ns = t_ns;
      c.is_link = true;
      c.carrier = (ifi->ifi_flags & IFF_LOWER_UP) != 0 && (ifi->ifi_flags & IFF_UP) != 0;
      c.oif = ifi->ifi_index;
      for_each_attr(nlh, sizeof(ifinfomsg), [&](const nlattr* a) {
        if (mnl_attr_get_type(a) == IFLA_IFNAME) c.ifname = mnl_attr_get_str(a);
      });
      if (c.ifname.empty()) c.ifname = std::to_string(c.oif);
      out.push_back(c);
    }
    if (nlh->nlmsg_type == RTM_NEWROUTE || nlh->nlmsg_type == RTM_DELROUTE) {
      const auto* rtm = static_cast<const rtmsg*>(mnl_nlmsg_get_payload(nlh));
      if (rtm->rtm_family == AF_INET && rtm->rtm_table == RT_TABLE_MAIN &&
          rtm->rtm_type == RTN_UNICAST) {
        RouteChange c;
        c.t_ns = t_ns;
        c.added = nlh->nlmsg_type == RTM_NEWROUTE;
        c.dst = rtm->rtm_dst_len == 0 ? "default" : "";
        for_each_attr(nlh, sizeof(rtmsg), [&](const nlattr* a) {
          switch (mnl_attr_get_type(a)) {
            case RTA_DST: {
              char txt[INET_ADDRSTRLEN] = {};
              inet_ntop(AF_INET, mnl_attr_get_payload(a), txt, sizeof txt);
              c.dst = std::string(txt) + "/" + std::to_string(rtm->rtm_dst_len);
              break;
            }
            case RTA_OIF:
              c.oif = static_cast<int>(mnl_attr_get_u32(a));
              break;
            case RTA_PRIORITY:
              c.priority = mnl_attr_get_u32(a);
              break;
            case RTA_MULTIPATH: {
              c.nexthops = 0;
              const auto* nh = static_cast<const rtnexthop*>(mnl_attr_get_payload(a));
              int nl = static_cast<int>(mnl_attr_get_payload_len(a));
              while (RTNH_OK(nh, nl)) {
                ++c.nexthops;
                nl -= NLMSG_ALIGN(nh->rtnh_len);
                nh = RTNH_NEXT(nh);
              }
              break;
            }
            default:
              break;
          }
        });
        out.push_back(c);
      }
    }
    nlh = mnl_nlmsg_next(nlh, &left);
  }
  return out;
}

}  // namespace tb::netlink
