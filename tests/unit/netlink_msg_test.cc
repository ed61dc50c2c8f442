// Netlink message builders and ack/dump parsers, checked byte by byte without root: each
// request is parsed back with libmnl and its header, family struct and attributes compared.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <linux/gen_stats.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_arp.h>
#include <linux/if_link.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "netlink/ack.h"
#include "netlink/dump.h"
#include "netlink/message.h"

namespace tb::netlink {
namespace {

using Attrs = std::map<uint16_t, const nlattr*>;

int collect_cb(const nlattr* a, void* data) {
  (*static_cast<Attrs*>(data))[mnl_attr_get_type(a)] = a;
  return MNL_CB_OK;
}

Attrs attrs_of(const nlmsghdr* nlh, size_t family_len) {
  Attrs out;
  EXPECT_EQ(mnl_attr_parse(nlh, family_len, collect_cb, &out), MNL_CB_OK);
  return out;
}

Attrs nested(const nlattr* a) {
  Attrs out;
  EXPECT_EQ(mnl_attr_parse_nested(a, collect_cb, &out), MNL_CB_OK);
  return out;
}

std::string str(const nlattr* a) {
  return std::string(
      static_cast<const char*>(mnl_attr_get_payload(a)),
      strnlen(static_cast<const char*>(mnl_attr_get_payload(a)), mnl_attr_get_payload_len(a)));
}

uint32_t ip(const char* dotted) {
  return inet_addr(dotted);
}  // network order

Prefix pfx(const char* text) {
  return *parse_prefix(text);
}

// Every request: one well-formed message whose length is the buffer's, seq 0, no ACK yet.
void expect_request(const NlMsg& m, uint16_t type, uint16_t flags) {
  ASSERT_GE(m.bytes.size(), sizeof(nlmsghdr));
  const nlmsghdr* h = m.header();
  EXPECT_EQ(h->nlmsg_len, m.bytes.size());
  EXPECT_TRUE(mnl_nlmsg_ok(h, static_cast<int>(m.bytes.size())));
  EXPECT_EQ(h->nlmsg_type, type);
  EXPECT_EQ(h->nlmsg_flags, flags);
  EXPECT_EQ(h->nlmsg_seq, 0u);
  EXPECT_EQ(h->nlmsg_flags & NLM_F_ACK, 0);
}

TEST(NetlinkMsg, VethBothEndsPlacedInTheirNamespaces) {
  NlMsg m = new_veth({"nvl", 5, 7}, {"g0", 9, 8}, 9000, /*a_master=*/3);
  expect_request(m, RTM_NEWLINK, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  const auto* ifi = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(m.header()));
  EXPECT_EQ(ifi->ifi_index, 5);
  EXPECT_EQ(ifi->ifi_flags, unsigned{IFF_UP});
  EXPECT_EQ(ifi->ifi_change, unsigned{IFF_UP});
  Attrs a = attrs_of(m.header(), sizeof(ifinfomsg));
  EXPECT_EQ(str(a.at(IFLA_IFNAME)), "nvl");
  EXPECT_EQ(mnl_attr_get_u32(a.at(IFLA_MTU)), 9000u);
  EXPECT_EQ(mnl_attr_get_u32(a.at(IFLA_NET_NS_FD)), 7u);
  EXPECT_EQ(mnl_attr_get_u32(a.at(IFLA_MASTER)), 3u);
  Attrs info = nested(a.at(IFLA_LINKINFO));
  EXPECT_EQ(str(info.at(IFLA_INFO_KIND)), "veth");
  Attrs data = nested(info.at(IFLA_INFO_DATA));
  const nlattr* peer = data.at(VETH_INFO_PEER);
  ASSERT_GE(mnl_attr_get_payload_len(peer), sizeof(ifinfomsg));
  const auto* pifi = static_cast<const ifinfomsg*>(mnl_attr_get_payload(peer));
  EXPECT_EQ(pifi->ifi_index, 9);
  EXPECT_EQ(pifi->ifi_flags, 0u);  // a peer cannot be opened before the pair is tied
  EXPECT_EQ(pifi->ifi_change, 0u);
  // The peer's attributes follow its ifinfomsg inside VETH_INFO_PEER.
  Attrs pa;
  const auto* first = reinterpret_cast<const uint8_t*>(pifi) + NLMSG_ALIGN(sizeof(ifinfomsg));
  int left = static_cast<int>(mnl_attr_get_payload_len(peer) - NLMSG_ALIGN(sizeof(ifinfomsg)));
  for (auto* x = reinterpret_cast<const nlattr*>(first); mnl_attr_ok(x, left);
       left -= static_cast<int>(MNL_ALIGN(x->nla_len)), x = mnl_attr_next(x))
    pa[mnl_attr_get_type(x)] = x;
  EXPECT_EQ(str(pa.at(IFLA_IFNAME)), "g0");
  EXPECT_EQ(mnl_attr_get_u32(pa.at(IFLA_NET_NS_FD)), 8u);
  EXPECT_EQ(mnl_attr_get_u32(pa.at(IFLA_MTU)), 9000u);
  EXPECT_EQ(pa.count(IFLA_MASTER), 0u);
}

TEST(NetlinkMsg, VethWithoutNamespaceOrMasterLeavesThemOut) {
  NlMsg m = new_veth({"a", 0, -1}, {"b", 0, -1}, 1500);
  Attrs a = attrs_of(m.header(), sizeof(ifinfomsg));
  EXPECT_EQ(a.count(IFLA_NET_NS_FD), 0u);
  EXPECT_EQ(a.count(IFLA_MASTER), 0u);
}

TEST(NetlinkMsg, BridgeIsCreatedUp) {
  NlMsg m = new_bridge("nvsw", 4, 1500);
  expect_request(m, RTM_NEWLINK, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  const auto* ifi = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(m.header()));
  EXPECT_EQ(ifi->ifi_index, 4);
  EXPECT_EQ(ifi->ifi_flags & IFF_UP, unsigned{IFF_UP});
  Attrs a = attrs_of(m.header(), sizeof(ifinfomsg));
  EXPECT_EQ(str(a.at(IFLA_IFNAME)), "nvsw");
  EXPECT_EQ(str(nested(a.at(IFLA_LINKINFO)).at(IFLA_INFO_KIND)), "bridge");
}

// A tunnel end: created down in the node's namespace, its socket in the sender's; VNI, both
// underlay addresses and the UDP port in network byte order, as the kernel reads them.
TEST(NetlinkMsg, VxlanIsCreatedInTheNodesNamespaceWithItsUnderlayEnds) {
  NlMsg m = new_vxlan({"ec", 6, 9, 10001, Ipv4{(198u << 24) | (19u << 16) | (254u << 8) | 1},
                       Ipv4{(198u << 24) | (19u << 16) | (254u << 8) | 2}, 4789, 1450});
  expect_request(m, RTM_NEWLINK, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  const auto* ifi = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(m.header()));
  EXPECT_EQ(ifi->ifi_index, 6);
  EXPECT_EQ(ifi->ifi_flags & IFF_UP, 0u);  // up with its alias and master, in its namespace
  Attrs a = attrs_of(m.header(), sizeof(ifinfomsg));
  EXPECT_EQ(str(a.at(IFLA_IFNAME)), "ec");
  EXPECT_EQ(mnl_attr_get_u32(a.at(IFLA_MTU)), 1450u);
  EXPECT_EQ(mnl_attr_get_u32(a.at(IFLA_NET_NS_FD)), 9u);
  Attrs info = nested(a.at(IFLA_LINKINFO));
  EXPECT_EQ(str(info.at(IFLA_INFO_KIND)), "vxlan");
  Attrs data = nested(info.at(IFLA_INFO_DATA));
  EXPECT_EQ(mnl_attr_get_u32(data.at(IFLA_VXLAN_ID)), 10001u);
  const auto* remote = static_cast<const uint8_t*>(mnl_attr_get_payload(data.at(IFLA_VXLAN_GROUP)));
  EXPECT_EQ(std::vector<uint8_t>(remote, remote + 4), (std::vector<uint8_t>{198, 19, 254, 2}));
  const auto* local = static_cast<const uint8_t*>(mnl_attr_get_payload(data.at(IFLA_VXLAN_LOCAL)));
  EXPECT_EQ(std::vector<uint8_t>(local, local + 4), (std::vector<uint8_t>{198, 19, 254, 1}));
  const auto* port = static_cast<const uint8_t*>(mnl_attr_get_payload(data.at(IFLA_VXLAN_PORT)));
  EXPECT_EQ(port[0] * 256 + port[1], 4789);
}

TEST(NetlinkMsg, LoopbackUpWithAliasSetsOnlyWhatIsAsked) {
  NlMsg m = set_link({.ifindex = kLoopbackIfindex, .up = true, .alias = "testbedctl lab=x"});
  expect_request(m, RTM_NEWLINK, NLM_F_REQUEST);
  const auto* ifi = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(m.header()));
  EXPECT_EQ(ifi->ifi_index, 1);
  EXPECT_EQ(ifi->ifi_flags, unsigned{IFF_UP});
  EXPECT_EQ(ifi->ifi_change, unsigned{IFF_UP});
  Attrs a = attrs_of(m.header(), sizeof(ifinfomsg));
  // The alias is sent without a NUL: the kernel stores exactly the attribute's bytes.
  EXPECT_EQ(mnl_attr_get_payload_len(a.at(IFLA_IFALIAS)), 16u);
  EXPECT_EQ(str(a.at(IFLA_IFALIAS)), "testbedctl lab=x");
  EXPECT_EQ(a.size(), 1u);

  NlMsg master = set_link({.ifindex = 6, .master = 2});
  const auto* mifi = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(master.header()));
  EXPECT_EQ(mifi->ifi_change, 0u);  // up/down left alone
  Attrs ma = attrs_of(master.header(), sizeof(ifinfomsg));
  EXPECT_EQ(mnl_attr_get_u32(ma.at(IFLA_MASTER)), 2u);
  EXPECT_EQ(ma.size(), 1u);
}

TEST(NetlinkMsg, DeleteLinkByIndexOrName) {
  NlMsg by_name = del_link(0, "g0");
  expect_request(by_name, RTM_DELLINK, NLM_F_REQUEST);
  EXPECT_EQ(str(attrs_of(by_name.header(), sizeof(ifinfomsg)).at(IFLA_IFNAME)), "g0");
  NlMsg by_index = del_link(7);
  EXPECT_EQ(static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(by_index.header()))->ifi_index, 7);
  EXPECT_TRUE(attrs_of(by_index.header(), sizeof(ifinfomsg)).empty());
}

TEST(NetlinkMsg, AddressCarriesLocalAndPrefixLength) {
  NlMsg m = new_addr(3, pfx("198.18.0.5/31"));
  expect_request(m, RTM_NEWADDR, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  const auto* ifa = static_cast<const ifaddrmsg*>(mnl_nlmsg_get_payload(m.header()));
  EXPECT_EQ(ifa->ifa_family, AF_INET);
  EXPECT_EQ(ifa->ifa_prefixlen, 31);
  EXPECT_EQ(ifa->ifa_index, 3u);
  Attrs a = attrs_of(m.header(), sizeof(ifaddrmsg));
  EXPECT_EQ(mnl_attr_get_u32(a.at(IFA_LOCAL)), ip("198.18.0.5"));
  EXPECT_EQ(mnl_attr_get_u32(a.at(IFA_ADDRESS)), ip("198.18.0.5"));
  expect_request(del_addr(3, pfx("198.18.0.5/31")), RTM_DELADDR, NLM_F_REQUEST);
  EXPECT_EQ(a.count(IFA_FLAGS), 0u);  // no flags: the kernel makes the subnet's route
}

// An ecn region's VPC address: IFA_F_NOPREFIXROUTE (0x200, above ifa_flags' eight bits) in
// IFA_FLAGS, so the kernel makes no route for the subnet (the plan adds its own with a congctl).
TEST(NetlinkMsg, AddressWithoutPrefixRouteCarriesTheFlagInIfaFlags) {
  NlMsg m = new_addr(3, pfx("198.18.0.34/27"), true);
  expect_request(m, RTM_NEWADDR, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  const auto* ifa = static_cast<const ifaddrmsg*>(mnl_nlmsg_get_payload(m.header()));
  EXPECT_EQ(ifa->ifa_prefixlen, 27);
  Attrs a = attrs_of(m.header(), sizeof(ifaddrmsg));
  ASSERT_EQ(a.count(IFA_FLAGS), 1u);
  EXPECT_EQ(mnl_attr_get_u32(a.at(IFA_FLAGS)), uint32_t{IFA_F_NOPREFIXROUTE});
  EXPECT_EQ(mnl_attr_get_u32(a.at(IFA_LOCAL)), ip("198.18.0.34"));
}

TEST(NetlinkMsg, SingleOnlinkRouteWithSourceAndMetric) {
  RouteSpec r{pfx("198.18.4.0/24"),
              {{2, *parse_ipv4("198.18.9.1"), true, 1}},
              *parse_ipv4("198.18.0.1"),
              20};
  NlMsg m = new_route(r);
  expect_request(m, RTM_NEWROUTE, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  const auto* rtm = static_cast<const rtmsg*>(mnl_nlmsg_get_payload(m.header()));
  EXPECT_EQ(rtm->rtm_family, AF_INET);
  EXPECT_EQ(rtm->rtm_dst_len, 24);
  EXPECT_EQ(rtm->rtm_table, RT_TABLE_MAIN);
  EXPECT_EQ(rtm->rtm_protocol, RTPROT_STATIC);
  EXPECT_EQ(rtm->rtm_scope, RT_SCOPE_UNIVERSE);
  EXPECT_EQ(rtm->rtm_type, RTN_UNICAST);
  EXPECT_EQ(rtm->rtm_flags, unsigned{RTNH_F_ONLINK});
  Attrs a = attrs_of(m.header(), sizeof(rtmsg));
  EXPECT_EQ(mnl_attr_get_u32(a.at(RTA_DST)), ip("198.18.4.0"));
  EXPECT_EQ(mnl_attr_get_u32(a.at(RTA_OIF)), 2u);
  EXPECT_EQ(mnl_attr_get_u32(a.at(RTA_GATEWAY)), ip("198.18.9.1"));
  EXPECT_EQ(mnl_attr_get_u32(a.at(RTA_PREFSRC)), ip("198.18.0.1"));
  EXPECT_EQ(mnl_attr_get_u32(a.at(RTA_PRIORITY)), 20u);
  EXPECT_EQ(a.count(RTA_MULTIPATH), 0u);
}

TEST(NetlinkMsg, DeviceRouteHasLinkScopeAndNoGateway) {
  NlMsg m = new_route({pfx("198.18.7.7/32"), {{4, std::nullopt, false, 1}}, std::nullopt, 0});
  const auto* rtm = static_cast<const rtmsg*>(mnl_nlmsg_get_payload(m.header()));
  EXPECT_EQ(rtm->rtm_scope, RT_SCOPE_LINK);
  EXPECT_EQ(rtm->rtm_flags, 0u);
  Attrs a = attrs_of(m.header(), sizeof(rtmsg));
  EXPECT_EQ(a.count(RTA_GATEWAY), 0u);
  EXPECT_EQ(a.count(RTA_PRIORITY), 0u);
  EXPECT_EQ(a.count(RTA_PREFSRC), 0u);
}

// congctl (an ecn region's default routes): RTA_METRICS holding RTAX_CC_ALGO, the name
// NUL-terminated, as `ip route ... congctl cubic` sends it; none without.
TEST(NetlinkMsg, ARoutesCongestionControlIsItsCcAlgoMetric) {
  RouteSpec r{
      pfx("0.0.0.0/0"), {{4, *parse_ipv4("198.18.0.33"), true, 1}}, std::nullopt, 0, "cubic"};
  NlMsg m = new_route(r);
  Attrs a = attrs_of(m.header(), sizeof(rtmsg));
  ASSERT_EQ(a.count(RTA_METRICS), 1u);
  // One attribute inside the nest: RTAX_CC_ALGO.
  const auto* mx = a.at(RTA_METRICS);
  const auto* cc = static_cast<const nlattr*>(mnl_attr_get_payload(mx));
  ASSERT_EQ(mnl_attr_get_type(cc), RTAX_CC_ALGO);
  EXPECT_STREQ(mnl_attr_get_str(cc), "cubic");
  EXPECT_EQ(mnl_attr_get_payload_len(cc), 6u);
  r.congctl.clear();
  NlMsg plain = new_route(r);
  EXPECT_EQ(attrs_of(plain.header(), sizeof(rtmsg)).count(RTA_METRICS), 0u);
}

TEST(NetlinkMsg, MultipathOnlinkRouteListsEachNexthop) {
  RouteSpec r{pfx("198.18.8.0/24"),
              {{2, *parse_ipv4("198.18.0.1"), true, 1}, {3, *parse_ipv4("198.18.0.2"), true, 3}},
              std::nullopt,
              0};
  NlMsg m = new_route(r);
  const auto* rtm = static_cast<const rtmsg*>(mnl_nlmsg_get_payload(m.header()));
  EXPECT_EQ(rtm->rtm_flags, 0u);  // onlink lives in each rtnexthop
  Attrs a = attrs_of(m.header(), sizeof(rtmsg));
  EXPECT_EQ(a.count(RTA_OIF), 0u);
  EXPECT_EQ(a.count(RTA_GATEWAY), 0u);
  const nlattr* mp = a.at(RTA_MULTIPATH);
  const auto* p = static_cast<const uint8_t*>(mnl_attr_get_payload(mp));
  size_t left = mnl_attr_get_payload_len(mp);
  struct Seen {
    int ifindex, hops, flags;
    uint32_t gw;
  };
  std::vector<Seen> seen;
  while (left >= sizeof(rtnexthop)) {
    const auto* nh = reinterpret_cast<const rtnexthop*>(p);
    ASSERT_GE(nh->rtnh_len, sizeof(rtnexthop));
    ASSERT_LE(nh->rtnh_len, left);
    const auto* attr = reinterpret_cast<const nlattr*>(p + RTNH_ALIGN(sizeof(rtnexthop)));
    ASSERT_EQ(nh->rtnh_len, RTNH_ALIGN(sizeof(rtnexthop)) + MNL_ALIGN(attr->nla_len));
    ASSERT_EQ(mnl_attr_get_type(attr), RTA_GATEWAY);
    seen.push_back({nh->rtnh_ifindex, nh->rtnh_hops, nh->rtnh_flags, mnl_attr_get_u32(attr)});
    p += RTNH_ALIGN(nh->rtnh_len);
    left -= RTNH_ALIGN(nh->rtnh_len);
  }
  EXPECT_EQ(left, 0u);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].ifindex, 2);
  EXPECT_EQ(seen[0].hops, 0);
  EXPECT_EQ(seen[0].flags, RTNH_F_ONLINK);
  EXPECT_EQ(seen[0].gw, ip("198.18.0.1"));
  EXPECT_EQ(seen[1].ifindex, 3);
  EXPECT_EQ(seen[1].hops, 2);  // weight 3
  EXPECT_EQ(seen[1].gw, ip("198.18.0.2"));
}

TEST(NetlinkMsg, DeleteRouteMatchesAnyScopeAndNexthop) {
  NlMsg m = del_route(pfx("198.18.8.0/24"), 20);
  expect_request(m, RTM_DELROUTE, NLM_F_REQUEST);
  const auto* rtm = static_cast<const rtmsg*>(mnl_nlmsg_get_payload(m.header()));
  EXPECT_EQ(rtm->rtm_scope, RT_SCOPE_NOWHERE);
  EXPECT_EQ(rtm->rtm_protocol, 0);
  Attrs a = attrs_of(m.header(), sizeof(rtmsg));
  EXPECT_EQ(mnl_attr_get_u32(a.at(RTA_PRIORITY)), 20u);
  EXPECT_EQ(a.count(RTA_OIF), 0u);
}

TEST(NetlinkMsg, ReplaceRouteIsANewRouteThatMayReplace) {
  RouteSpec r{pfx("198.18.0.8/32"), {{4, pfx("198.18.0.2/32").addr, true, 1}}, std::nullopt, 0};
  NlMsg m = replace_route(r);
  expect_request(m, RTM_NEWROUTE, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE);
  NlMsg n = new_route(r);
  // Everything after the header is new_route's.
  EXPECT_TRUE(std::equal(m.bytes.begin() + sizeof(nlmsghdr), m.bytes.end(),
                         n.bytes.begin() + sizeof(nlmsghdr), n.bytes.end()));
}

TEST(NetlinkMsg, GetRouteAsksForTheMatchedEntry) {
  NlMsg m = get_route(pfx("198.18.0.8/32").addr);
  expect_request(m, RTM_GETROUTE, NLM_F_REQUEST);
  const auto* rtm = static_cast<const rtmsg*>(mnl_nlmsg_get_payload(m.header()));
  EXPECT_EQ(rtm->rtm_family, AF_INET);
  EXPECT_EQ(rtm->rtm_dst_len, 32);
  EXPECT_EQ(rtm->rtm_flags, static_cast<unsigned>(RTM_F_FIB_MATCH));
  Attrs a = attrs_of(m.header(), sizeof(rtmsg));
  EXPECT_EQ(mnl_attr_get_u32(a.at(RTA_DST)), ip("198.18.0.8"));
}

TEST(NetlinkMsg, RouteMatchReadsLengthAndOutputInterface) {
  alignas(nlmsghdr) char buf[512] = {};
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_NEWROUTE;
  auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
  rtm->rtm_family = AF_INET;
  rtm->rtm_dst_len = 32;
  mnl_attr_put_u32(nlh, RTA_OIF, 9);
  auto m = parse_route_match(nlh);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->dst_len, 32);
  EXPECT_EQ(m->oif, 9);
  EXPECT_EQ(m->nexthops, 1);
  EXPECT_EQ(m->mtu, 0);  // no mtu metric
  rtm->rtm_family = AF_INET6;
  EXPECT_FALSE(parse_route_match(nlh));
  nlh->nlmsg_type = RTM_NEWLINK;
  EXPECT_FALSE(parse_route_match(nlh));
}

// A route with an mtu metric (`ip route add ... mtu 1400`): RTAX_MTU inside RTA_METRICS, which
// up's underlay check takes before the output device's MTU.
TEST(NetlinkMsg, RouteMatchReadsTheRoutesMtuMetric) {
  alignas(nlmsghdr) char buf[512] = {};
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_NEWROUTE;
  auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
  rtm->rtm_family = AF_INET;
  rtm->rtm_dst_len = 24;
  rtm->rtm_table = RT_TABLE_MAIN;
  rtm->rtm_type = RTN_UNICAST;
  uint32_t dst = ip("10.0.0.0");
  mnl_attr_put(nlh, RTA_DST, 4, &dst);
  mnl_attr_put_u32(nlh, RTA_OIF, 3);
  nlattr* metrics = mnl_attr_nest_start(nlh, RTA_METRICS);
  mnl_attr_put_u32(nlh, RTAX_MTU, 1400);
  mnl_attr_nest_end(nlh, metrics);
  auto m = parse_route_match(nlh);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->oif, 3);
  EXPECT_EQ(m->mtu, 1400);
}

// A fibmatch answer for an ECMP route (two next hops, each with its gateway) and a preferred
// source: every hop in the kernel's order, no single output interface.
TEST(NetlinkMsg, RouteMatchReadsEveryNextHopOfAMultipathEntry) {
  alignas(nlmsghdr) char buf[512] = {};
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_NEWROUTE;
  auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
  rtm->rtm_family = AF_INET;
  rtm->rtm_dst_len = 24;
  rtm->rtm_table = RT_TABLE_MAIN;
  rtm->rtm_type = RTN_UNICAST;
  uint32_t dst = ip("198.18.3.0"), src = ip("198.18.2.1"), gw = ip("198.18.2.2");
  mnl_attr_put(nlh, RTA_DST, 4, &dst);
  mnl_attr_put(nlh, RTA_PREFSRC, 4, &src);
  nlattr* mp = mnl_attr_nest_start(nlh, RTA_MULTIPATH);
  for (int i = 0; i < 2; ++i) {
    auto* nh = static_cast<rtnexthop*>(mnl_nlmsg_get_payload_tail(nlh));
    nh->rtnh_ifindex = 10 + i;
    nh->rtnh_flags = RTNH_F_ONLINK;
    nlh->nlmsg_len += MNL_ALIGN(sizeof(rtnexthop));
    mnl_attr_put(nlh, RTA_GATEWAY, 4, &gw);
    nh->rtnh_len = static_cast<unsigned short>(
        reinterpret_cast<char*>(mnl_nlmsg_get_payload_tail(nlh)) - reinterpret_cast<char*>(nh));
  }
  mnl_attr_nest_end(nlh, mp);
  auto m = parse_route_match(nlh);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->dst_len, 24);
  EXPECT_EQ(m->nexthops, 2);
  EXPECT_EQ(m->oif, 0);
  ASSERT_EQ(m->hops.size(), 2u);
  EXPECT_EQ(m->hops[0].ifindex, 10);
  EXPECT_EQ(m->hops[1].ifindex, 11);
  EXPECT_EQ(m->hops[1].via, *parse_ipv4("198.18.2.2"));
  EXPECT_EQ(m->prefsrc, *parse_ipv4("198.18.2.1"));
}

// ---- acks -----------------------------------------------------------------------------------

// An NLMSG_ERROR as the kernel sends it with NETLINK_CAP_ACK and NETLINK_EXT_ACK.
std::vector<uint8_t> error_ack(uint32_t seq, int error, const char* text) {
  std::vector<uint8_t> buf(1024);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = NLMSG_ERROR;
  nlh->nlmsg_seq = seq;
  nlh->nlmsg_flags = NLM_F_CAPPED | (text ? NLM_F_ACK_TLVS : 0);
  auto* err = static_cast<nlmsgerr*>(mnl_nlmsg_put_extra_header(nlh, sizeof(nlmsgerr)));
  err->error = -error;
  err->msg.nlmsg_len = sizeof(nlmsghdr);
  err->msg.nlmsg_type = RTM_NEWLINK;
  err->msg.nlmsg_seq = seq;
  if (text) mnl_attr_put_strz(nlh, NLMSGERR_ATTR_MSG, text);
  buf.resize(nlh->nlmsg_len);
  return buf;
}

TEST(NetlinkAck, ErrorAckBecomesOurSentenceWithKernelText) {
  auto bytes = error_ack(42, EEXIST, "Some kernel detail");
  Ack ack = parse_ack(reinterpret_cast<const nlmsghdr*>(bytes.data()));
  EXPECT_EQ(ack.seq, 42u);
  EXPECT_EQ(ack.error, EEXIST);
  EXPECT_EQ(ack.detail, "Some kernel detail");
  Error e = ack_error("create veth nvl <-> g0 in netns tb-x-a", ack);
  EXPECT_EQ(e.message,
            "create veth nvl <-> g0 in netns tb-x-a: File exists (kernel: Some kernel detail)");
  EXPECT_EQ(e.sys_errno, EEXIST);
}

TEST(NetlinkAck, SuccessAndPlainErrors) {
  auto ok = error_ack(7, 0, nullptr);
  EXPECT_EQ(parse_ack(reinterpret_cast<const nlmsghdr*>(ok.data())).error, 0);
  auto plain = error_ack(8, ENODEV, nullptr);
  Ack ack = parse_ack(reinterpret_cast<const nlmsghdr*>(plain.data()));
  EXPECT_EQ(ack_error("delete veth x", ack).message, "delete veth x: No such device");
}

// ---- dump parsers ---------------------------------------------------------------------------

TEST(NetlinkDump, ParsesLinkWithKindAliasAndStats) {
  std::vector<uint8_t> buf(2048);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_NEWLINK;
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifi->ifi_index = 4;
  ifi->ifi_type = ARPHRD_ETHER;
  ifi->ifi_flags = IFF_UP | IFF_LOWER_UP;
  mnl_attr_put_strz(nlh, IFLA_IFNAME, "g0");
  // With its NUL, as the kernel sends it (rtnl_fill_alias: nla_put_string); libnl checks it.
  mnl_attr_put_strz(nlh, IFLA_IFALIAS, "owner");
  mnl_attr_put_u32(nlh, IFLA_MTU, 9000);
  mnl_attr_put_u32(nlh, IFLA_MASTER, 2);
  nlattr* li = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
  mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
  mnl_attr_nest_end(nlh, li);
  rtnl_link_stats64 st{};
  st.rx_bytes = 1000;
  st.tx_bytes = 2000;
  st.rx_dropped = 3;
  st.tx_dropped = 4;
  mnl_attr_put(nlh, IFLA_STATS64, sizeof(st), &st);
  auto r = parse_link(nlh);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->ifindex, 4);
  EXPECT_EQ(r->name, "g0");
  EXPECT_EQ(r->alias, "owner");
  EXPECT_EQ(r->kind, "veth");
  EXPECT_EQ(r->mtu, 9000);
  EXPECT_EQ(r->master, 2);
  EXPECT_EQ(r->rx_bytes, 1000u);
  EXPECT_EQ(r->tx_bytes, 2000u);
  EXPECT_EQ(r->rx_dropped, 3u);
  EXPECT_EQ(r->tx_dropped, 4u);
  EXPECT_TRUE(r->flags & IFF_LOWER_UP);
}

TEST(NetlinkDump, ParsesAQdiscWithItsQueueStatistics) {
  std::vector<uint8_t> buf(1024);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_NEWQDISC;
  auto* t = static_cast<tcmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(tcmsg)));
  t->tcm_ifindex = 5;
  t->tcm_handle = 0x10000;
  t->tcm_parent = TC_H_ROOT;
  mnl_attr_put_strz(nlh, TCA_KIND, "tbf");
  nlattr* st = mnl_attr_nest_start(nlh, TCA_STATS2);
  gnet_stats_basic b{};
  b.bytes = 123456;
  b.packets = 100;
  mnl_attr_put(nlh, TCA_STATS_BASIC, sizeof(b), &b);
  gnet_stats_queue q{};
  q.qlen = 2;
  q.backlog = 3000;
  q.drops = 7;
  q.overlimits = 9;
  mnl_attr_put(nlh, TCA_STATS_QUEUE, sizeof(q), &q);
  mnl_attr_nest_end(nlh, st);
  auto r = parse_qdisc(nlh);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->ifindex, 5);
  EXPECT_EQ(r->parent, TC_H_ROOT);
  EXPECT_EQ(r->kind, "tbf");
  EXPECT_EQ(r->bytes, 123456u);
  EXPECT_EQ(r->drops, 7u);
  EXPECT_EQ(r->backlog, 3000u);
  EXPECT_EQ(r->qlen, 2u);
  EXPECT_EQ(r->overlimits, 9u);
  nlh->nlmsg_type = RTM_NEWLINK;
  EXPECT_FALSE(parse_qdisc(nlh).has_value());
}

TEST(NetlinkDump, ParsesIpv4AddressAndSkipsOthers) {
  std::vector<uint8_t> buf(512);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_NEWADDR;
  auto* ifa = static_cast<ifaddrmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifaddrmsg)));
  ifa->ifa_family = AF_INET;
  ifa->ifa_prefixlen = 31;
  ifa->ifa_index = 3;
  uint32_t a = ip("198.18.0.1");
  mnl_attr_put(nlh, IFA_LOCAL, 4, &a);
  auto r = parse_ipv4_addr(nlh);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->ifindex, 3);
  EXPECT_EQ(r->addr.to_string(), "198.18.0.1/31");
  ifa->ifa_family = AF_INET6;
  EXPECT_FALSE(parse_ipv4_addr(nlh).has_value());
}

}  // namespace
}  // namespace tb::netlink
