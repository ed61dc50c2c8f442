// Traffic-control builders, checked byte by byte without root: each request is parsed back with
// libmnl and its header, tcmsg, kind and options compared with what iproute2's tc sends
// (tc/q_tbf.c, q_netem.c, q_htb.c, q_fifo.c), minus the legacy rate tables.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <string>

#include "netlink/tc_message.h"

namespace tb::netlink {
namespace {

using Attrs = std::map<uint16_t, const nlattr*>;

int collect_cb(const nlattr* a, void* data) {
  (*static_cast<Attrs*>(data))[mnl_attr_get_type(a)] = a;
  return MNL_CB_OK;
}

Attrs attrs_of(const nlmsghdr* nlh) {
  Attrs out;
  EXPECT_EQ(mnl_attr_parse(nlh, sizeof(tcmsg), collect_cb, &out), MNL_CB_OK);
  return out;
}

Attrs nested(const nlattr* a) {
  Attrs out;
  EXPECT_EQ(mnl_attr_parse_nested(a, collect_cb, &out), MNL_CB_OK);
  return out;
}

// Attributes that follow a struct of `skip` bytes inside `a` (netem's TCA_OPTIONS).
Attrs after_struct(const nlattr* a, size_t skip) {
  Attrs out;
  const auto* base = static_cast<const uint8_t*>(mnl_attr_get_payload(a)) + MNL_ALIGN(skip);
  int left = static_cast<int>(mnl_attr_get_payload_len(a) - MNL_ALIGN(skip));
  for (auto* x = reinterpret_cast<const nlattr*>(base); mnl_attr_ok(x, left);
       left -= static_cast<int>(MNL_ALIGN(x->nla_len)), x = mnl_attr_next(x))
    out[mnl_attr_get_type(x)] = x;
  EXPECT_EQ(left, 0);
  return out;
}

template <class T>
T payload_as(const nlattr* a) {
  EXPECT_GE(mnl_attr_get_payload_len(a), sizeof(T));
  T v;
  std::memcpy(&v, mnl_attr_get_payload(a), sizeof(T));
  return v;
}

const tcmsg* tcm_of(const NlMsg& m) {
  return static_cast<const tcmsg*>(mnl_nlmsg_get_payload(m.header()));
}

void expect_request(const NlMsg& m, uint16_t type, uint16_t flags) {
  const nlmsghdr* h = m.header();
  EXPECT_EQ(h->nlmsg_len, m.bytes.size());
  EXPECT_TRUE(mnl_nlmsg_ok(h, static_cast<int>(m.bytes.size())));
  EXPECT_EQ(h->nlmsg_type, type);
  EXPECT_EQ(h->nlmsg_flags, flags);
  EXPECT_EQ(h->nlmsg_seq, 0u);
}

std::string kind_of(const Attrs& a) {
  return static_cast<const char*>(mnl_attr_get_payload(a.at(TCA_KIND)));
}

constexpr uint16_t kReplaceFlags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE;

TEST(TcMessage, TbfReplacesAtRootWithBurstAndNoRateTable) {
  NlMsg m = new_tc({7, TC_H_ROOT, 0x10000}, TbfOptions{1'250'000, 3028, 68564});
  expect_request(m, RTM_NEWQDISC, kReplaceFlags);
  EXPECT_EQ(tcm_of(m)->tcm_family, AF_UNSPEC);
  EXPECT_EQ(tcm_of(m)->tcm_ifindex, 7);
  EXPECT_EQ(tcm_of(m)->tcm_parent, TC_H_ROOT);
  EXPECT_EQ(tcm_of(m)->tcm_handle, 0x10000u);
  Attrs a = attrs_of(m.header());
  EXPECT_EQ(kind_of(a), "tbf");
  EXPECT_EQ(mnl_attr_get_payload_len(a.at(TCA_KIND)), 4u);  // NUL-terminated, as tc sends it
  EXPECT_TRUE(a.at(TCA_OPTIONS)->nla_type & NLA_F_NESTED);
  Attrs o = nested(a.at(TCA_OPTIONS));
  auto q = payload_as<tc_tbf_qopt>(o.at(TCA_TBF_PARMS));
  EXPECT_EQ(q.rate.rate, 1'250'000u);
  EXPECT_EQ(q.rate.linklayer, TC_LINKLAYER_ETHERNET);
  EXPECT_EQ(q.peakrate.rate, 0u);
  EXPECT_EQ(q.limit, 68564u);
  // 3028 bytes at 1.25 MB/s = 2422400 ns = 37850 ticks of 64 ns.
  EXPECT_EQ(q.buffer, 37850u);
  EXPECT_EQ(mnl_attr_get_u32(o.at(TCA_TBF_BURST)), 3028u);
  EXPECT_EQ(o.count(TCA_TBF_RATE64), 0u);
  EXPECT_EQ(o.count(TCA_TBF_RTAB), 0u);
  EXPECT_EQ(o.size(), 2u);
}

TEST(TcMessage, TbfAbove32BitsSendsRate64) {
  const uint64_t rate = 50'000'000'000;  // 400 Gbit/s
  NlMsg m = new_tc({3, TC_H_ROOT, 0x10000}, TbfOptions{rate, 50'000'000, 300'000'000});
  Attrs o = nested(attrs_of(m.header()).at(TCA_OPTIONS));
  EXPECT_EQ(payload_as<tc_tbf_qopt>(o.at(TCA_TBF_PARMS)).rate.rate, ~0u);
  EXPECT_EQ(mnl_attr_get_u64(o.at(TCA_TBF_RATE64)), rate);
  // Exactly 2^32 - 1 still fits; 2^32 does not.
  Attrs below =
      nested(attrs_of(new_tc({3, TC_H_ROOT, 0x10000}, TbfOptions{0xffffffffull, 1, 1}).header())
                 .at(TCA_OPTIONS));
  EXPECT_EQ(below.count(TCA_TBF_RATE64), 0u);
  Attrs above =
      nested(attrs_of(new_tc({3, TC_H_ROOT, 0x10000}, TbfOptions{0x100000000ull, 1, 1}).header())
                 .at(TCA_OPTIONS));
  EXPECT_EQ(mnl_attr_get_u64(above.at(TCA_TBF_RATE64)), 0x100000000ull);
}

TEST(TcMessage, NetemOptionsAreAStructFollowedByAttributes) {
  NetemOptions n{25'000'000, 1'000'000, 1.0, 4000, 0, normal_jitter_table(512)};
  NlMsg m = new_tc({5, TC_H_ROOT, 0x20000}, n);
  expect_request(m, RTM_NEWQDISC, kReplaceFlags);
  Attrs a = attrs_of(m.header());
  EXPECT_EQ(kind_of(a), "netem");
  const nlattr* opts = a.at(TCA_OPTIONS);
  EXPECT_EQ(opts->nla_type & NLA_F_NESTED, 0);  // netem parses it by hand (parse_attr)
  auto q = payload_as<tc_netem_qopt>(opts);
  EXPECT_EQ(q.latency, 25'000'000u / 64);
  EXPECT_EQ(q.jitter, 1'000'000u / 64);
  EXPECT_EQ(q.limit, 4000u);
  EXPECT_EQ(q.loss, netem_probability(1.0));
  EXPECT_EQ(q.gap, 0u);
  EXPECT_EQ(q.duplicate, 0u);
  Attrs o = after_struct(opts, sizeof(tc_netem_qopt));
  EXPECT_EQ(static_cast<int64_t>(mnl_attr_get_u64(o.at(TCA_NETEM_LATENCY64))), 25'000'000);
  EXPECT_EQ(static_cast<int64_t>(mnl_attr_get_u64(o.at(TCA_NETEM_JITTER64))), 1'000'000);
  EXPECT_EQ(mnl_attr_get_payload_len(o.at(TCA_NETEM_DELAY_DIST)), 512u * 2);
  EXPECT_EQ(o.count(TCA_NETEM_RATE), 0u);
  EXPECT_EQ(o.count(TCA_NETEM_RATE64), 0u);
}

TEST(TcMessage, NetemRateUses64BitsAbove4GBps) {
  NetemOptions small{0, 0, 0, 1000, 1'250'000, {}};
  Attrs o1 = after_struct(attrs_of(new_tc({5, TC_H_ROOT, 0x30000}, small).header()).at(TCA_OPTIONS),
                          sizeof(tc_netem_qopt));
  EXPECT_EQ(payload_as<tc_netem_rate>(o1.at(TCA_NETEM_RATE)).rate, 1'250'000u);
  EXPECT_EQ(o1.count(TCA_NETEM_RATE64), 0u);
  EXPECT_EQ(o1.count(TCA_NETEM_DELAY_DIST), 0u);
  NetemOptions big{0, 0, 0, 1000, 50'000'000'000, {}};
  Attrs o2 = after_struct(attrs_of(new_tc({5, TC_H_ROOT, 0x30000}, big).header()).at(TCA_OPTIONS),
                          sizeof(tc_netem_qopt));
  EXPECT_EQ(payload_as<tc_netem_rate>(o2.at(TCA_NETEM_RATE)).rate, ~0u);
  EXPECT_EQ(mnl_attr_get_u64(o2.at(TCA_NETEM_RATE64)), 50'000'000'000u);
}

TEST(TcMessage, HtbRootIsCreateOnly) {
  NlMsg m = new_tc({4, TC_H_ROOT, 0x40000}, HtbOptions{1}, TcWrite::kCreateOnly);
  expect_request(m, RTM_NEWQDISC, kReplaceFlags | NLM_F_EXCL);
  Attrs a = attrs_of(m.header());
  EXPECT_EQ(kind_of(a), "htb");
  auto g = payload_as<tc_htb_glob>(nested(a.at(TCA_OPTIONS)).at(TCA_HTB_INIT));
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.rate2quantum, 10u);
  EXPECT_EQ(g.defcls, 1u);
}

TEST(TcMessage, HtbClassCarriesBufferTimesAndRate64) {
  NlMsg m = new_tc({4, 0x40000, 0x40001},
                   HtbClassOptions{625'000'000, 625'000'000, 625'000, 625'000, 200'000});
  expect_request(m, RTM_NEWTCLASS, kReplaceFlags);
  EXPECT_EQ(tcm_of(m)->tcm_parent, 0x40000u);
  EXPECT_EQ(tcm_of(m)->tcm_handle, 0x40001u);
  Attrs a = attrs_of(m.header());
  EXPECT_EQ(kind_of(a), "htb");
  Attrs o = nested(a.at(TCA_OPTIONS));
  auto h = payload_as<tc_htb_opt>(o.at(TCA_HTB_PARMS));
  EXPECT_EQ(h.rate.rate, 625'000'000u);
  EXPECT_EQ(h.ceil.rate, 625'000'000u);
  EXPECT_EQ(h.rate.linklayer, TC_LINKLAYER_ETHERNET);
  EXPECT_EQ(h.buffer, 1'000'000u / 64);  // 1 ms of tokens
  EXPECT_EQ(h.cbuffer, 1'000'000u / 64);
  EXPECT_EQ(h.quantum, 200'000u);
  EXPECT_EQ(o.count(TCA_HTB_RATE64), 0u);
  EXPECT_EQ(o.count(TCA_HTB_RTAB), 0u);
  EXPECT_EQ(o.count(TCA_HTB_CTAB), 0u);

  Attrs big = nested(
      attrs_of(new_tc({4, 0x40000, 0x40001}, HtbClassOptions{5'000'000'000, 6'000'000'000, 1, 1, 0})
                   .header())
          .at(TCA_OPTIONS));
  EXPECT_EQ(mnl_attr_get_u64(big.at(TCA_HTB_RATE64)), 5'000'000'000u);
  EXPECT_EQ(mnl_attr_get_u64(big.at(TCA_HTB_CEIL64)), 6'000'000'000u);
}

TEST(TcMessage, BfifoOptionsAreTheBareLimit) {
  NlMsg m = new_tc({4, 0x40001, 0x400000}, BfifoOptions{70'000});
  Attrs a = attrs_of(m.header());
  EXPECT_EQ(kind_of(a), "bfifo");
  EXPECT_EQ(mnl_attr_get_payload_len(a.at(TCA_OPTIONS)), sizeof(tc_fifo_qopt));
  EXPECT_EQ(payload_as<tc_fifo_qopt>(a.at(TCA_OPTIONS)).limit, 70'000u);
}

TEST(TcMessage, DeleteRootNamesNoHandle) {
  NlMsg m = del_qdisc(9, TC_H_ROOT);
  expect_request(m, RTM_DELQDISC, NLM_F_REQUEST);
  EXPECT_EQ(tcm_of(m)->tcm_ifindex, 9);
  EXPECT_EQ(tcm_of(m)->tcm_parent, TC_H_ROOT);
  EXPECT_EQ(tcm_of(m)->tcm_handle, 0u);
  EXPECT_EQ(m.bytes.size(), NLMSG_LENGTH(sizeof(tcmsg)));
}

TEST(TcMessage, KindsAndHandles) {
  EXPECT_EQ(tc_kind(TbfOptions{}), "tbf");
  EXPECT_EQ(tc_kind(HtbClassOptions{}), "htb");
  EXPECT_TRUE(is_class(HtbClassOptions{}));
  EXPECT_FALSE(is_class(HtbOptions{}));
  EXPECT_EQ(format_handle(TC_H_ROOT), "root");
  EXPECT_EQ(format_handle(0x10000), "1:");
  EXPECT_EQ(format_handle(0x20001), "2:1");
  EXPECT_EQ(format_handle(0x400000), "40:");
}

TEST(TcMessage, LossProbabilityIsScaledToU32) {
  EXPECT_EQ(netem_probability(0), 0u);
  EXPECT_EQ(netem_probability(100), 0xffffffffu);
  EXPECT_EQ(netem_probability(1), 42'949'673u);  // rint(0.01 * UINT32_MAX)
  EXPECT_EQ(netem_probability(150), 0xffffffffu);
}

TEST(TcMessage, NormalJitterTableHasUnitSigma) {
  auto t = normal_jitter_table(1024);
  ASSERT_EQ(t.size(), 1024u);
  EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
  EXPECT_EQ(t.front(), -t.back());  // symmetric
  double mean = std::accumulate(t.begin(), t.end(), 0.0) / t.size();
  double var = 0;
  for (int16_t v : t) var += (v - mean) * (v - mean);
  const double sigma = std::sqrt(var / t.size()) / NETEM_DIST_SCALE;
  EXPECT_NEAR(mean, 0, 1);
  EXPECT_NEAR(sigma, 1.0, 0.02);
  EXPECT_EQ(t[512], 10);  // quantile of 0.5 + 0.5/1024 = 0.00122 sigma
}

}  // namespace
}  // namespace tb::netlink

namespace tb::netlink {
namespace {

// A QoS class's priority travels in tc_htb_opt.prio, as `tc class ... htb prio N` sends it.
TEST(TcMessageQos, HtbClassCarriesItsPriority) {
  NlMsg m = new_tc({4, 0x70001, 0x70030},
                   HtbClassOptions{10'000'000, 50'000'000, 50'000, 50'000, 1514, 2});
  auto h = payload_as<tc_htb_opt>(nested(attrs_of(m.header()).at(TCA_OPTIONS)).at(TCA_HTB_PARMS));
  EXPECT_EQ(h.prio, 2u);
  EXPECT_EQ(h.rate.rate, 10'000'000u);
  EXPECT_EQ(h.ceil.rate, 50'000'000u);
}

// `tc filter add dev D parent 7: protocol ip prio 1 handle 800::3 u32 match ip dsfield 0xb8
// 0xfc classid 7:10`, byte for byte as iproute2 tc/f_u32.c packs it (sans its TCA_U32_FLAGS,
// which only asks for hardware offload policy).
TEST(TcMessageQos, U32DscpFilterMatchesTheTosByteAndNamesItsClass) {
  NlMsg m = new_u32_dscp_filter(9, U32DscpFilter{0x70000, 1, u32_handle(3), 46, 0x70010});
  const nlmsghdr* h = m.header();
  EXPECT_EQ(h->nlmsg_type, RTM_NEWTFILTER);
  EXPECT_EQ(h->nlmsg_flags, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  const tcmsg* t = tcm_of(m);
  EXPECT_EQ(t->tcm_ifindex, 9);
  EXPECT_EQ(t->tcm_parent, 0x70000u);
  EXPECT_EQ(t->tcm_handle, 0x80000003u);
  EXPECT_EQ(TC_H_MAJ(t->tcm_info) >> 16, 1u);         // prio 1
  EXPECT_EQ(TC_H_MIN(t->tcm_info), htons(ETH_P_IP));  // protocol ip
  Attrs a = attrs_of(h);
  EXPECT_EQ(kind_of(a), "u32");
  Attrs o = nested(a.at(TCA_OPTIONS));
  EXPECT_EQ(mnl_attr_get_u32(o.at(TCA_U32_CLASSID)), 0x70010u);
  ASSERT_EQ(mnl_attr_get_payload_len(o.at(TCA_U32_SEL)), sizeof(tc_u32_sel) + sizeof(tc_u32_key));
  const auto* p = static_cast<const uint8_t*>(mnl_attr_get_payload(o.at(TCA_U32_SEL)));
  tc_u32_sel sel;
  tc_u32_key key;
  std::memcpy(&sel, p, sizeof sel);
  std::memcpy(&key, p + sizeof sel, sizeof key);
  EXPECT_EQ(sel.flags, TC_U32_TERMINAL);
  EXPECT_EQ(sel.nkeys, 1);
  EXPECT_EQ(sel.off, 0);
  EXPECT_EQ(sel.hmask, 0u);
  EXPECT_EQ(ntohl(key.mask), 0x00fc0000u);  // the TOS byte's DSCP bits (ECN left out)
  EXPECT_EQ(ntohl(key.val), 0x00b80000u);   // 46 << 2 = 0xb8
  EXPECT_EQ(key.off, 0);
  // A packet with TOS 0xb9 (EF + ECT(1)) still matches; one with CS6 (0xc0) does not.
  const uint32_t word_ef_ecn = 0x45b90000u, word_cs6 = 0x45c00000u;
  EXPECT_EQ(word_ef_ecn & ntohl(key.mask), ntohl(key.val));
  EXPECT_NE(word_cs6 & ntohl(key.mask), ntohl(key.val));
  // Replace without EXCL when asked.
  EXPECT_EQ(new_u32_dscp_filter(9, U32DscpFilter{0x70000, 1, u32_handle(3), 46, 0x70010},
                                TcWrite::kReplace)
                .header()
                ->nlmsg_flags,
            NLM_F_REQUEST | NLM_F_CREATE);
  EXPECT_EQ(format_u32_handle(u32_handle(3)), "800::3");
  EXPECT_EQ(format_u32_handle(0x80001005u), "800:1:5");
}

// RED's derived fields as iproute2 tc/tc_red.c computes them for `red limit 100000 min 3000
// max 9000 avpkt 1000 probability 0.01 ecn` (burst (2 min + max) / (3 avpkt) = 5 packets: Wlog
// 2; 0.01 / 6000 doubled 20 times passes 1: Plog 20), and the request: its parms with the ECN
// flag, the 256-byte idle table, max_p and the nodrop bitfield.
TEST(TcMessageRed, RedOptionsAsIproute2DerivesThemAndItsRequest) {
  const RedOptions r = red_options(3000, 9000, 0.01, 100000, 1000, 12'500'000);
  EXPECT_EQ(r.wlog, 2);
  EXPECT_EQ(r.plog, 20);
  EXPECT_EQ(r.max_p, 42949672u);
  ASSERT_EQ(r.stab.size(), 256u);
  EXPECT_EQ(r.stab[0], 0);
  EXPECT_EQ(r.stab[255], 31);
  EXPECT_TRUE(std::is_sorted(r.stab.begin(), r.stab.end()));
  EXPECT_LT(r.scell_log, 32);
  NlMsg m = new_tc({9, 0x10001, 0x110000}, r, TcWrite::kReplace);
  EXPECT_EQ(m.header()->nlmsg_type, RTM_NEWQDISC);
  Attrs a = attrs_of(m.header());
  EXPECT_EQ(kind_of(a), "red");
  Attrs o = nested(a.at(TCA_OPTIONS));
  ASSERT_EQ(mnl_attr_get_payload_len(o.at(TCA_RED_PARMS)), sizeof(tc_red_qopt));
  tc_red_qopt q;
  std::memcpy(&q, mnl_attr_get_payload(o.at(TCA_RED_PARMS)), sizeof q);
  EXPECT_EQ(q.limit, 100000u);
  EXPECT_EQ(q.qth_min, 3000u);
  EXPECT_EQ(q.qth_max, 9000u);
  EXPECT_EQ(q.Wlog, 2);
  EXPECT_EQ(q.flags, 0);  // with nodrop every flag is in TCA_RED_FLAGS (red_get_flags)
  EXPECT_EQ(mnl_attr_get_payload_len(o.at(TCA_RED_STAB)), 256u);
  EXPECT_EQ(mnl_attr_get_u32(o.at(TCA_RED_MAX_P)), 42949672u);
  nla_bitfield32 f;
  std::memcpy(&f, mnl_attr_get_payload(o.at(TCA_RED_FLAGS)), sizeof f);
  EXPECT_EQ(f.value, static_cast<uint32_t>(TC_RED_ECN | TC_RED_NODROP));
  EXPECT_EQ(f.selector, static_cast<uint32_t>(TC_RED_ECN | TC_RED_NODROP));
}

// `tc qdisc add dev D clsact` and `tc filter add dev D egress prio 1 handle 1 bpf da fd F name
// N` (the congestion agent's idle wake, congestion/wake.h), as iproute2 tc/q_clsact.c and
// tc/f_bpf.c pack them.
TEST(TcMessageBpf, ClsactAndADirectActionBpfFilterOnItsEgressHook) {
  NlMsg q = new_clsact(9);
  EXPECT_EQ(q.header()->nlmsg_type, RTM_NEWQDISC);
  EXPECT_EQ(q.header()->nlmsg_flags, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  EXPECT_EQ(tcm_of(q)->tcm_parent, TC_H_CLSACT);
  EXPECT_EQ(tcm_of(q)->tcm_handle, 0xffff0000u);
  EXPECT_EQ(kind_of(attrs_of(q.header())), "clsact");
  NlMsg d = del_clsact(9);
  EXPECT_EQ(d.header()->nlmsg_type, RTM_DELQDISC);
  EXPECT_EQ(tcm_of(d)->tcm_parent, TC_H_CLSACT);
  NlMsg f = new_bpf_filter(9, BpfFilter{true, 1, 1, 17, "tb-congestion-wake"});
  const nlmsghdr* h = f.header();
  EXPECT_EQ(h->nlmsg_type, RTM_NEWTFILTER);
  const tcmsg* t = tcm_of(f);
  EXPECT_EQ(t->tcm_ifindex, 9);
  EXPECT_EQ(t->tcm_parent, 0xfffffff3u);  // clsact egress
  EXPECT_EQ(t->tcm_handle, 1u);
  EXPECT_EQ(TC_H_MAJ(t->tcm_info) >> 16, 1u);          // prio 1
  EXPECT_EQ(TC_H_MIN(t->tcm_info), htons(ETH_P_ALL));  // protocol all
  Attrs a = attrs_of(h);
  EXPECT_EQ(kind_of(a), "bpf");
  Attrs o = nested(a.at(TCA_OPTIONS));
  EXPECT_EQ(mnl_attr_get_u32(o.at(TCA_BPF_FD)), 17u);
  EXPECT_STREQ(mnl_attr_get_str(o.at(TCA_BPF_NAME)), "tb-congestion-wake");
  EXPECT_EQ(mnl_attr_get_u32(o.at(TCA_BPF_FLAGS)), static_cast<uint32_t>(TCA_BPF_FLAG_ACT_DIRECT));
  NlMsg in = new_bpf_filter(9, BpfFilter{false, 1, 1, 17, "x"});
  EXPECT_EQ(tcm_of(in)->tcm_parent, 0xfffffff2u);  // clsact ingress
}

}  // namespace
}  // namespace tb::netlink
