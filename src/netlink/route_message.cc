// Address and route builders (declared in netlink/message.h).
#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>

#include "netlink/message.h"
#include "netlink/message_builder.h"

namespace tb::netlink {
namespace {

NlMsg addr_msg(uint16_t type, uint16_t flags, int ifindex, Prefix addr, uint32_t ifa_flags = 0) {
  MessageBuilder m(type, flags);
  auto* ifa = m.put_extra<ifaddrmsg>();
  ifa->ifa_family = AF_INET;
  ifa->ifa_prefixlen = static_cast<uint8_t>(addr.len);
  ifa->ifa_scope = RT_SCOPE_UNIVERSE;
  ifa->ifa_index = static_cast<uint32_t>(ifindex);
  // IFA_LOCAL is the interface's own address; IFA_ADDRESS equals it on a non-point-to-point
  // link (iproute2 ip/ipaddress.c ipaddr_modify: "if (!peer_len) addattr_l(IFA_ADDRESS, lcl)").
  uint32_t a = addr.addr.network_order();
  m.put_bytes(IFA_LOCAL, &a, sizeof(a));
  m.put_bytes(IFA_ADDRESS, &a, sizeof(a));
  // Flags above the first eight (IFA_F_NOPREFIXROUTE is 0x200) go in IFA_FLAGS, which the
  // kernel prefers to ifa_flags when present (net/ipv4/devinet.c rtm_to_ifaddr; iproute2
  // ip/ipaddress.c ipaddr_modify sends it the same way).
  if (ifa_flags != 0) {
    ifa->ifa_flags = static_cast<uint8_t>(ifa_flags & 0xff);
    m.put_u32(IFA_FLAGS, ifa_flags);
  }
  return m.finish();
}

rtmsg* put_rtmsg(MessageBuilder& m, Prefix dst) {
  auto* rtm = m.put_extra<rtmsg>();
  rtm->rtm_family = AF_INET;
  rtm->rtm_dst_len = static_cast<uint8_t>(dst.len);
  rtm->rtm_table = RT_TABLE_MAIN;
  uint32_t d = dst.network().addr.network_order();
  m.put_bytes(RTA_DST, &d, sizeof(d));
  return rtm;
}

}  // namespace

NlMsg new_addr(int ifindex, Prefix addr, bool noprefixroute) {
  return addr_msg(RTM_NEWADDR, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL, ifindex, addr,
                  noprefixroute ? IFA_F_NOPREFIXROUTE : 0u);
}

NlMsg del_addr(int ifindex, Prefix addr) {
  return addr_msg(RTM_DELADDR, NLM_F_REQUEST, ifindex, addr);
}

NlMsg new_route(const RouteSpec& route) {
  TB_CHECK(!route.nexthops.empty());
  MessageBuilder m(RTM_NEWROUTE, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  rtmsg* rtm = put_rtmsg(m, route.dst);
  rtm->rtm_protocol = RTPROT_STATIC;
  rtm->rtm_type = RTN_UNICAST;
  // A route without any gateway is a device route of link scope; with gateways, universe
  // (iproute2 ip/iproute.c iproute_modify: "else if (!gw_ok && !nhs_ok) rtm_scope = LINK").
  bool any_gateway = false;
  for (const auto& nh : route.nexthops) any_gateway |= nh.via.has_value();
  rtm->rtm_scope = any_gateway ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK;
  m.put_u32(RTA_TABLE, RT_TABLE_MAIN);
  if (route.metric != 0) m.put_u32(RTA_PRIORITY, route.metric);
  if (route.src) {
    uint32_t s = route.src->network_order();
    m.put_bytes(RTA_PREFSRC, &s, sizeof(s));
  }
  // The route's congestion control, as `ip route ... congctl NAME` sends it (iproute2
  // ip/iproute.c: RTA_METRICS holding RTAX_CC_ALGO, the name NUL-terminated).
  if (!route.congctl.empty()) {
    nlattr* mx = m.nest_start(RTA_METRICS);
    m.put_str(RTAX_CC_ALGO, route.congctl);
    m.nest_end(mx);
  }
  if (route.nexthops.size() == 1) {
    const RouteNexthop& nh = route.nexthops[0];
    m.put_u32(RTA_OIF, static_cast<uint32_t>(nh.ifindex));
    if (nh.via) {
      uint32_t g = nh.via->network_order();
      m.put_bytes(RTA_GATEWAY, &g, sizeof(g));
    }
    if (nh.onlink) rtm->rtm_flags |= RTNH_F_ONLINK;
    return m.finish();
  }
  // RTA_MULTIPATH: a run of rtnexthop, each followed by its own attributes and covering them in
  // rtnh_len (include/uapi/linux/rtnetlink.h; iproute2 ip/iproute.c parse_nexthops).
  nlattr* mp = m.nest_start(RTA_MULTIPATH);
  for (const auto& nh : route.nexthops) {
    uint8_t* start = m.tail();
    auto* rtnh = m.put_extra<rtnexthop>();
    rtnh->rtnh_ifindex = nh.ifindex;
    rtnh->rtnh_hops = static_cast<unsigned char>(nh.weight > 0 ? nh.weight - 1 : 0);
    rtnh->rtnh_flags = nh.onlink ? RTNH_F_ONLINK : 0;
    if (nh.via) {
      uint32_t g = nh.via->network_order();
      m.put_bytes(RTA_GATEWAY, &g, sizeof(g));
    }
    rtnh->rtnh_len = static_cast<unsigned short>(m.tail() - start);
  }
  m.nest_end(mp);
  return m.finish();
}

NlMsg replace_route(const RouteSpec& route) {
  NlMsg m = new_route(route);
  m.header()->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE;
  return m;
}

NlMsg del_route(Prefix dst, uint32_t metric) {
  MessageBuilder m(RTM_DELROUTE, NLM_F_REQUEST);
  rtmsg* rtm = put_rtmsg(m, dst);
  // Scope "nowhere" matches a route of any scope on delete (net/ipv4/fib_trie.c
  // fib_table_delete); protocol and type 0 match any.
  rtm->rtm_scope = RT_SCOPE_NOWHERE;
  m.put_u32(RTA_TABLE, RT_TABLE_MAIN);
  if (metric != 0) m.put_u32(RTA_PRIORITY, metric);
  return m.finish();
}

NlMsg get_route(Ipv4 dst) {
  MessageBuilder m(RTM_GETROUTE, NLM_F_REQUEST);
  rtmsg* rtm = put_rtmsg(m, Prefix{dst, 32});
  // The matched FIB entry, not a cached dst (iproute2 ip/iproute.c iproute_get "fibmatch";
  // net/ipv4/route.c inet_rtm_getroute). An output lookup: ignore_routes_with_linkdown applies.
  rtm->rtm_flags = RTM_F_FIB_MATCH;
  rtm->rtm_table = 0;
  return m.finish();
}

}  // namespace tb::netlink
