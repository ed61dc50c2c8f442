// Route and carrier notifications parsed from bytes built the way the kernel sends them, and
// the failover agent's config round trip.
#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/rtnetlink.h>

#include <arpa/inet.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "failover/agent.h"
#include "netlink/route_monitor.h"

namespace tb {
namespace {

// One RTM_NEWROUTE / RTM_DELROUTE for `dst`/len with either an output interface or two next hops.
size_t put_route(char* buf, uint16_t type, const char* dst, uint8_t len, int oif, int nexthops) {
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = type;
  auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
  rtm->rtm_family = AF_INET;
  rtm->rtm_dst_len = len;
  rtm->rtm_table = RT_TABLE_MAIN;
  rtm->rtm_type = RTN_UNICAST;
  in_addr a{};
  inet_pton(AF_INET, dst, &a);
  mnl_attr_put(nlh, RTA_DST, sizeof a, &a);
  mnl_attr_put_u32(nlh, RTA_PRIORITY, 100);
  if (nexthops == 0) {
    mnl_attr_put_u32(nlh, RTA_OIF, static_cast<uint32_t>(oif));
  } else {
    nlattr* mp = mnl_attr_nest_start(nlh, RTA_MULTIPATH);
    for (int i = 0; i < nexthops; ++i) {
      auto* nh = static_cast<rtnexthop*>(mnl_nlmsg_get_payload_tail(nlh));
      nh->rtnh_len = sizeof(rtnexthop);
      nh->rtnh_ifindex = 10 + i;
      nlh->nlmsg_len += MNL_ALIGN(sizeof(rtnexthop));
    }
    mnl_attr_nest_end(nlh, mp);
  }
  return nlh->nlmsg_len;
}

size_t put_link(char* buf, const char* name, unsigned flags) {
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_NEWLINK;
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifi->ifi_index = 7;
  ifi->ifi_flags = flags;
  mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
  return nlh->nlmsg_len;
}

TEST(RouteMonitor, ParsesRouteAndCarrierNotifications) {
  alignas(nlmsghdr) char buf[4096] = {};
  size_t n = put_route(buf, RTM_DELROUTE, "198.18.2.0", 24, 5, 0);
  n += put_route(buf + n, RTM_NEWROUTE, "198.18.0.8", 32, 0, 2);
  n += put_link(buf + n, "raila", IFF_UP);  // carrier lost
  auto got = netlink::parse_route_changes(buf, n, 42);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_FALSE(got[0].added);
  EXPECT_EQ(got[0].dst, "198.18.2.0/24");
  EXPECT_EQ(got[0].oif, 5);
  EXPECT_EQ(got[0].priority, 100u);
  EXPECT_EQ(got[0].t_ns, 42);
  EXPECT_TRUE(got[1].added);
  EXPECT_EQ(got[1].dst, "198.18.0.8/32");
  EXPECT_EQ(got[1].nexthops, 2);
  EXPECT_TRUE(got[2].is_link);
  EXPECT_FALSE(got[2].carrier);
  EXPECT_EQ(got[2].ifname, "raila");
  n = put_link(buf, "raila", IFF_UP | IFF_LOWER_UP);
  got = netlink::parse_route_changes(buf, n, 43);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].carrier);
}

TEST(FailoverAgent, ConfigRoundTripsAndRefusesNonsense) {
  failover::AgentConfig c{
      "hz/tr", 7900, 10'000'000, 3, {{"ec", "ec", "198.18.1.33", {"198.18.2.0/24"}, 100}}};
  auto back = failover::agent_config_from_json(failover::to_json(c));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->paths.at(0).peer, "198.18.1.33");
  EXPECT_EQ(back->paths.at(0).dsts.at(0), "198.18.2.0/24");
  EXPECT_EQ(back->interval_ns, 10'000'000);
  auto j = failover::to_json(c);
  j["interval_ns"] = 10;  // below 1 ms
  EXPECT_FALSE(failover::agent_config_from_json(j));
  j = failover::to_json(c);
  j["paths"] = nlohmann::json::array();
  EXPECT_FALSE(failover::agent_config_from_json(j));
}

}  // namespace
}  // namespace tb
