// The congestion agent's levers without a kernel: the qdisc stats dump's parser
// (netlink/qdisc_stats.h) on messages built here and on new_tc's own TBF request (the pause the
// agent sends, read back as a dump would show it), and the PFC kick's frame (congestion/kick.h).
// tests/netns/congestion_levers_test.cc drives both against the kernel.
#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <linux/gen_stats.h>
#include <linux/if_link.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include <cstring>
#include <vector>

#include "congestion/kick.h"
#include "netlink/link_stats.h"
#include "netlink/qdisc_stats.h"
#include "netlink/tc_message.h"

namespace tb::congestion {
namespace {

// An RTM_NEWQDISC as a dump returns it: tcmsg, kind, TBF options, TCA_STATS2.
std::vector<uint8_t> dumped_tbf(int ifindex, uint32_t handle, uint32_t parent, uint64_t rate,
                                uint32_t limit, uint32_t backlog, uint32_t drops) {
  std::vector<uint8_t> buf(4096);
  nlmsghdr* h = mnl_nlmsg_put_header(buf.data());
  h->nlmsg_type = RTM_NEWQDISC;
  auto* t = static_cast<tcmsg*>(mnl_nlmsg_put_extra_header(h, sizeof(tcmsg)));
  t->tcm_ifindex = ifindex;
  t->tcm_handle = handle;
  t->tcm_parent = parent;
  mnl_attr_put_strz(h, TCA_KIND, "tbf");
  nlattr* o = mnl_attr_nest_start(h, TCA_OPTIONS);
  tc_tbf_qopt q{};
  q.rate.rate = rate > 0xFFFFFFFFull ? 0xFFFFFFFFu : static_cast<uint32_t>(rate);
  q.limit = limit;
  mnl_attr_put(h, TCA_TBF_PARMS, sizeof q, &q);
  if (rate > 0xFFFFFFFFull) mnl_attr_put_u64(h, TCA_TBF_RATE64, rate);
  mnl_attr_nest_end(h, o);
  nlattr* s = mnl_attr_nest_start(h, TCA_STATS2);
  gnet_stats_basic b{};
  b.bytes = 123456;
  b.packets = 789;
  mnl_attr_put(h, TCA_STATS_BASIC, sizeof b, &b);
  gnet_stats_queue g{};
  g.qlen = 3;
  g.backlog = backlog;
  g.drops = drops;
  g.overlimits = 11;
  mnl_attr_put(h, TCA_STATS_QUEUE, sizeof g, &g);
  mnl_attr_nest_end(h, s);
  buf.resize(h->nlmsg_len);
  return buf;
}

TEST(QdiscStats, ParsesTheCountersAndTheTbfRateOfADumpedQdisc) {
  const auto m = dumped_tbf(7, 0x10000, TC_H_ROOT, 50'000'000, 2'000'000, 155'000, 4);
  netlink::QdiscStats q;
  ASSERT_TRUE(netlink::parse_qdisc_stats(reinterpret_cast<const nlmsghdr*>(m.data()), q));
  EXPECT_EQ(q.ifindex, 7);
  EXPECT_EQ(q.handle, 0x10000u);
  EXPECT_EQ(q.parent, TC_H_ROOT);
  EXPECT_STREQ(q.kind, "tbf");
  EXPECT_EQ(q.bytes, 123456u);
  EXPECT_EQ(q.packets, 789u);
  EXPECT_EQ(q.backlog, 155'000u);
  EXPECT_EQ(q.qlen, 3u);
  EXPECT_EQ(q.drops, 4u);
  EXPECT_EQ(q.overlimits, 11u);
  EXPECT_EQ(q.tbf_rate, 50'000'000u);
  EXPECT_EQ(q.tbf_limit, 2'000'000u);
}

TEST(QdiscStats, ARateAbove32BitsComesFromRate64) {
  const auto m = dumped_tbf(3, 0x10000, TC_H_ROOT, 50'000'000'000ull, 1000, 0, 0);
  netlink::QdiscStats q;
  ASSERT_TRUE(netlink::parse_qdisc_stats(reinterpret_cast<const nlmsghdr*>(m.data()), q));
  EXPECT_EQ(q.tbf_rate, 50'000'000'000ull);
}

// The pause is new_tc's TBF replace at 1 B/s and a one-frame burst: the parser reads its rate
// and limit back from the request itself (the same TCA_OPTIONS a dump carries).
TEST(QdiscStats, ReadsThePauseRequestsRateBack) {
  const auto pause = netlink::new_tc(
      {9, TC_H_ROOT, 0x10000}, netlink::TbfOptions{1, 1514, 16u << 20}, netlink::TcWrite::kReplace);
  netlink::QdiscStats q;
  ASSERT_TRUE(netlink::parse_qdisc_stats(pause.header(), q));
  EXPECT_EQ(q.ifindex, 9);
  EXPECT_STREQ(q.kind, "tbf");
  EXPECT_EQ(q.tbf_rate, 1u);
  EXPECT_EQ(q.tbf_limit, 16u << 20);
  EXPECT_EQ(q.backlog, 0u);  // a request carries no stats
}

// The bucket comes back from the buffer time the kernel keeps (64 ns ticks): within one tick's
// worth of bytes below what was asked (the agent restores what a pause found in force).
TEST(QdiscStats, ReadsATbfsBucketBackWithinOneTick) {
  for (uint32_t burst : {50'000u, 4'214u, 1'514u}) {
    const auto req =
        netlink::new_tc({9, TC_H_ROOT, 0x10000}, netlink::TbfOptions{50'000'000, burst, 300'000},
                        netlink::TcWrite::kReplace);
    netlink::QdiscStats q;
    ASSERT_TRUE(netlink::parse_qdisc_stats(req.header(), q));
    EXPECT_LE(q.tbf_burst, burst);
    EXPECT_GE(q.tbf_burst + 4, burst) << "50 MB/s x 64 ns = 3.2 B";  // one tick's worth
  }
}

TEST(QdiscStats, OtherMessagesAndOtherKindsAreNotTbfs) {
  auto m = dumped_tbf(7, 0x10000, TC_H_ROOT, 1000, 1000, 0, 0);
  reinterpret_cast<nlmsghdr*>(m.data())->nlmsg_type = RTM_NEWLINK;
  netlink::QdiscStats q;
  EXPECT_FALSE(netlink::parse_qdisc_stats(reinterpret_cast<const nlmsghdr*>(m.data()), q));
  const auto netem = netlink::new_tc({4, TC_H_ROOT, 0x20000}, netlink::NetemOptions{.limit = 100},
                                     netlink::TcWrite::kReplace);
  ASSERT_TRUE(netlink::parse_qdisc_stats(netem.header(), q));
  EXPECT_STREQ(q.kind, "netem");
  EXPECT_EQ(q.tbf_rate, 0u);
  const auto req = netlink::qdisc_dump_request();
  EXPECT_EQ(req.header()->nlmsg_type, RTM_GETQDISC);
  EXPECT_EQ(req.header()->nlmsg_flags, NLM_F_REQUEST | NLM_F_DUMP);
}

// The activity filter's counters: one RTM_NEWSTATS as an IFLA_STATS_LINK_64 dump returns it.
TEST(LinkStats, ParsesTheLink64CountersOfADumpedLink) {
  std::vector<uint8_t> buf(4096);
  nlmsghdr* h = mnl_nlmsg_put_header(buf.data());
  h->nlmsg_type = RTM_NEWSTATS;
  auto* m = static_cast<if_stats_msg*>(mnl_nlmsg_put_extra_header(h, sizeof(if_stats_msg)));
  m->ifindex = 12;
  rtnl_link_stats64 st{};
  st.rx_bytes = 5'000'000'000ull;
  st.rx_packets = 77;
  st.tx_bytes = 42;
  st.rx_dropped = 3;
  mnl_attr_put(h, IFLA_STATS_LINK_64, sizeof st, &st);
  netlink::LinkStats l;
  ASSERT_TRUE(netlink::parse_link_stats(h, l));
  EXPECT_EQ(l.ifindex, 12);
  EXPECT_EQ(l.rx_bytes, 5'000'000'000ull);
  EXPECT_EQ(l.rx_packets, 77u);
  EXPECT_EQ(l.rx_dropped, 3u);
  EXPECT_EQ(l.tx_bytes, 42u);
  h->nlmsg_type = RTM_NEWLINK;
  EXPECT_FALSE(netlink::parse_link_stats(h, l));
  const auto req = netlink::link_stats_dump_request();
  EXPECT_EQ(req.header()->nlmsg_type, RTM_GETSTATS);
  EXPECT_EQ(req.header()->nlmsg_flags, NLM_F_REQUEST | NLM_F_DUMP);
  const auto* q = static_cast<const if_stats_msg*>(mnl_nlmsg_get_payload(req.header()));
  EXPECT_EQ(q->filter_mask, IFLA_STATS_FILTER_BIT(IFLA_STATS_LINK_64));
}

TEST(PfcFrame, XonIsMacControlOpcode0101WithEveryClassEnabledAndZeroTimes) {
  const std::array<uint8_t, 6> src = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  const PfcFrame f = pfc_xon(src);
  ASSERT_EQ(f.size(), 60u);
  const uint8_t head[] = {0x01, 0x80, 0xC2, 0x00, 0x00, 0x01,  // 802.3 Annex 31B
                          0x02, 0x11, 0x22, 0x33, 0x44, 0x55,  // source
                          0x88, 0x08,                          // MAC control
                          0x01, 0x01,                          // PFC
                          0x00, 0xFF};                         // class-enable vector
  EXPECT_EQ(std::memcmp(f.data(), head, sizeof head), 0);
  for (size_t i = sizeof head; i < f.size(); ++i) EXPECT_EQ(f[i], 0) << "byte " << i;
}

TEST(PfcFrame, PauseTimesAreBigEndianPerPriority) {
  const PfcFrame f = pfc_frame({}, 0x08, {0, 0, 0, 0xFFFF, 0, 0, 0, 0x0102});
  EXPECT_EQ(f[17], 0x08);
  EXPECT_EQ(f[18 + 2 * 3], 0xFF);
  EXPECT_EQ(f[19 + 2 * 3], 0xFF);
  EXPECT_EQ(f[18 + 2 * 7], 0x01);
  EXPECT_EQ(f[19 + 2 * 7], 0x02);
}

}  // namespace
}  // namespace tb::congestion
