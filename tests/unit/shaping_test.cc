// Shaping as data, without root: burst and buffer sizing, the backend registry, each backend's
// qdisc tree and residual, the SetShape op's text and journal form, and shape_ops over a
// topology.
#include <gtest/gtest.h>
#include <linux/pkt_sched.h>

#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "plan/op.h"
#include "plan/shaping.h"
#include "shaping/backend.h"
#include "shaping/sizing.h"

namespace tb::shaping {
namespace {

LinkShape shape(double bps, int64_t delay_ns = 0, int64_t jitter_ns = 0, double loss = 0,
                int mtu = 1500) {
  return LinkShape{Rate{bps}, Duration{delay_ns}, Duration{jitter_ns}, loss, mtu};
}

constexpr int64_t kMs = 1'000'000;

TEST(ShapingSizing, BurstIsOneMillisecondOrTwoFrames) {
  EXPECT_EQ(frame_bytes(1500), 1514u);
  EXPECT_EQ(bytes_per_second(Rate{10e6}), 1'250'000u);
  // 10 Mbit/s: 1 ms is 1250 bytes, less than two frames.
  EXPECT_EQ(burst_bytes(shape(10e6)), 3028u);
  EXPECT_EQ(burst_bytes(shape(10e6, 0, 0, 0, 9000)), 18028u);
  // 5 Gbit/s: 1 ms of tokens, where HTB's default lost ~7% (research/limits.md 3).
  EXPECT_EQ(burst_bytes(shape(5e9)), 625'000u);
  EXPECT_EQ(burst_bytes(shape(0)), 0u);
}

TEST(ShapingSizing, BufferFollowsTheBandwidthDelayProduct) {
  // 10 Mbit/s, no delay: 5 ms of headroom is 6250 bytes; the 64 KiB floor wins.
  EXPECT_EQ(queue_bytes(shape(10e6)), 65'536u);
  EXPECT_EQ(limit_bytes(shape(10e6)), 65'536u + 3028u);
  EXPECT_EQ(queue_latency(shape(10e6)).ns, 52'428'800);
  // 5 Gbit/s: 625 MB/s x 5 ms.
  EXPECT_EQ(queue_bytes(shape(5e9)), 3'125'000u);
  EXPECT_EQ(limit_bytes(shape(5e9)), 3'750'000u);
  // 1 Gbit/s, 25 ms +- 1 ms: 125 MB/s x 31 ms.
  EXPECT_EQ(queue_bytes(shape(1e9, 25 * kMs, 1 * kMs)), 3'875'000u);
  EXPECT_EQ(queue_latency(shape(1e9, 25 * kMs, 1 * kMs)).ns, 31 * kMs);
  // Never more than the kernel's 32-bit limit field.
  EXPECT_EQ(limit_bytes(shape(1.6e12, 25 * kMs)), std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(queue_bytes(shape(0, 25 * kMs)), 0u);
}

TEST(ShapingSizing, NetemLimitCoversDelayLineAndChildQueue) {
  // 10 Gbit/s, 25 ms: delay line 31.25 MB + tbf limit (37.5 MB + 1.25 MB burst) in 1514-byte
  // frames.
  const LinkShape s = shape(10e9, 25 * kMs);
  EXPECT_EQ(delay_line_bytes(s), 31'250'000u);
  EXPECT_EQ(limit_bytes(s), 38'750'000u);
  EXPECT_EQ(netem_limit_packets(s, limit_bytes(s)), 46'236u);
  // Unlimited rate: the delay line is counted at the host's 20 Gbit/s.
  EXPECT_EQ(netem_limit_packets(shape(0, 10 * kMs), 0), 16'513u);
  // Jitter stretches the line by four standard deviations.
  EXPECT_EQ(delay_line_bytes(shape(8e6, 10 * kMs, 1 * kMs)), 14'000u);
  // Small links keep netem's own default.
  EXPECT_EQ(netem_limit_packets(shape(10e6, 1 * kMs), 68'564), kMinNetemPackets);
}

TEST(ShapingRegistry, KindsInPreferenceOrder) {
  EXPECT_EQ(backend_kinds(), "netem, tbf, htb");
  ASSERT_NE(find_backend("tbf"), nullptr);
  EXPECT_EQ(find_backend("tbf")->kind, "tbf");
  EXPECT_EQ(find_backend("cake"), nullptr);
  auto pick = [](std::vector<std::string> caps) {
    const Backend* b = pick_backend(caps);
    return b ? std::string(b->kind) : std::string("none");
  };
  EXPECT_EQ(pick({"htb", "tbf", "netem"}), "netem");
  EXPECT_EQ(pick({"htb", "tbf", "ingress"}), "tbf");  // this kernel: no sch_netem
  EXPECT_EQ(pick({"netem", "htb"}), "htb");           // netem's layout needs tbf too
  EXPECT_EQ(pick({}), "none");
}

TEST(ShapingRegistry, BadShapesAndUnknownBackendsAreBadInput) {
  auto bad = [](const LinkShape& s, const char* backend, const char* says) {
    auto r = plan_qdiscs(s, backend);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().exit_code, kExitBadInput);
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  };
  bad(shape(10e6), "cake", "known: netem, tbf, htb");
  bad(shape(10e6, -1), "tbf", "delay -1ns is negative");
  bad(shape(10e6, 0, -5), "tbf", "jitter");
  bad(shape(10e6, 0, 0, 120), "tbf", "loss 120% is outside 0..100%");
  bad(shape(10e6, 0, 0, 0, 40), "tbf", "mtu 40");
  bad(shape(4), "tbf", "below 8 bit/s");
  bad(shape(-1), "tbf", "not a rate");
  EXPECT_TRUE(plan_qdiscs(shape(0), "netem"));
}

TEST(ShapingBackends, TbfLimitsTheRateAndLeavesTheRestAsResidual) {
  auto p = plan_qdiscs(shape(10e6, 5 * kMs, 1 * kMs, 0.1), "tbf");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->backend, "tbf");
  ASSERT_EQ(p->nodes.size(), 1u);
  const TcNode& n = p->nodes[0];
  EXPECT_EQ(n.parent, TC_H_ROOT);
  EXPECT_EQ(n.handle, kTbfRoot);
  EXPECT_FALSE(n.create_only);
  const auto& t = std::get<netlink::TbfOptions>(n.options);
  EXPECT_EQ(t.rate, 1'250'000u);
  EXPECT_EQ(t.burst, 3028u);
  EXPECT_EQ(t.limit, 65'536u + 3028u);
  EXPECT_EQ(p->residual, (Residual{Duration{5 * kMs}, Duration{1 * kMs}, 0.1}));
  EXPECT_EQ(to_text(*p),
            "qdisc tbf 1: root rate 10Mbit burst 3028b limit 68564b\n"
            "residual delay 5ms jitter 1ms loss 0.1%\n");

  auto unlimited = plan_qdiscs(shape(0, 5 * kMs), "tbf");
  ASSERT_TRUE(unlimited);
  EXPECT_TRUE(unlimited->nodes.empty());
  EXPECT_EQ(unlimited->residual.delay.ns, 5 * kMs);
}

TEST(ShapingBackends, NetemHoldsTheDelayLineAboveATbf) {
  auto p = plan_qdiscs(shape(1e9, 25 * kMs, 1 * kMs, 0.5), "netem");
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->residual.empty());
  ASSERT_EQ(p->nodes.size(), 2u);
  EXPECT_EQ(p->nodes[0].handle, kNetemTbfRoot);
  EXPECT_EQ(p->nodes[0].parent, TC_H_ROOT);
  const auto& n = std::get<netlink::NetemOptions>(p->nodes[0].options);
  EXPECT_EQ(n.delay_ns, 25 * kMs);
  EXPECT_EQ(n.jitter_ns, 1 * kMs);
  EXPECT_EQ(n.loss_pct, 0.5);
  EXPECT_EQ(n.rate, kOrderingRate);  // only to keep packets in order; the rate is tbf's
  EXPECT_EQ(n.jitter_table.size(), 1024u);
  EXPECT_EQ(n.limit, netem_limit_packets(shape(1e9, 25 * kMs, 1 * kMs),
                                         limit_bytes(shape(1e9, 25 * kMs, 1 * kMs))));
  EXPECT_EQ(p->nodes[1].parent, TC_H_MAKE(kNetemTbfRoot, 1));
  EXPECT_EQ(p->nodes[1].handle, kNetemTbfChild);
  EXPECT_EQ(std::get<netlink::TbfOptions>(p->nodes[1].options).rate, 125'000'000u);

  // The same layout without delay, so adding or removing delay changes parameters in place.
  auto rate_only = plan_qdiscs(shape(1e9), "netem");
  ASSERT_TRUE(rate_only);
  ASSERT_EQ(rate_only->nodes.size(), 2u);
  EXPECT_EQ(rate_only->nodes[0].handle, kNetemTbfRoot);
  EXPECT_TRUE(std::get<netlink::NetemOptions>(rate_only->nodes[0].options).jitter_table.empty());

  auto delay_only = plan_qdiscs(shape(0, 10 * kMs), "netem");
  ASSERT_TRUE(delay_only);
  ASSERT_EQ(delay_only->nodes.size(), 1u);
  EXPECT_EQ(delay_only->nodes[0].handle, kNetemRoot);

  auto nothing = plan_qdiscs(shape(0), "netem");
  ASSERT_TRUE(nothing);
  EXPECT_TRUE(nothing->nodes.empty());
  EXPECT_EQ(to_text(*nothing), "qdisc default root\n");
}

TEST(ShapingBackends, NetemJitterNeverReorders) {
  // netem reorders packets closer together than the jitter unless it has a rate of its own
  // (sch_netem.c netem_enqueue); every netem node gets one, far above any veth, with or without
  // a link rate, so jitter means the same as in the userspace stage (stage/delay_line.h).
  for (const LinkShape& s : {shape(0, 10 * kMs, 2 * kMs), shape(1e9, 10 * kMs, 2 * kMs),
                             shape(0, 10 * kMs), shape(20e9, 0, 0, 1)}) {
    auto p = plan_qdiscs(s, "netem");
    ASSERT_TRUE(p);
    ASSERT_FALSE(p->nodes.empty());
    const auto& n = std::get<netlink::NetemOptions>(p->nodes[0].options);
    EXPECT_EQ(n.rate, kOrderingRate);
    EXPECT_GT(n.rate, 100 * bytes_per_second(kHostVethRate));
  }
  auto p = plan_qdiscs(shape(0, 10 * kMs, 2 * kMs), "netem");
  EXPECT_EQ(to_text(p->nodes[0]),
            "qdisc netem 3: root limit 29723 delay 10ms 2ms distribution normal rate 8Tbit");
  EXPECT_NE(p->notes.back().find("keeps packets in order"), std::string::npos);
}

TEST(ShapingBackends, NetemReordersOnlyWhenAskedInLayoutsOfItsOwn) {
  LinkShape s = shape(0, 10 * kMs, 2 * kMs);
  s.reorder = true;
  auto alone = plan_qdiscs(s, "netem");
  ASSERT_TRUE(alone);
  ASSERT_EQ(alone->nodes.size(), 1u);
  EXPECT_EQ(alone->nodes[0].handle, kNetemReorderRoot);
  EXPECT_EQ(std::get<netlink::NetemOptions>(alone->nodes[0].options).rate, 0u);
  EXPECT_NE(alone->notes.back().find("jitter reorders"), std::string::npos);
  s.rate = Rate{1e9};
  auto limited = plan_qdiscs(s, "netem");
  ASSERT_TRUE(limited);
  ASSERT_EQ(limited->nodes.size(), 2u);
  EXPECT_EQ(limited->nodes[0].handle, kNetemReorderTbfRoot);
  EXPECT_EQ(std::get<netlink::NetemOptions>(limited->nodes[0].options).rate, 0u);
  EXPECT_EQ(limited->nodes[1].parent, kNetemReorderTbfClass);
  EXPECT_EQ(limited->nodes[1].parent, TC_H_MAKE(kNetemReorderTbfRoot, 1));
  EXPECT_EQ(limited->nodes[1].handle, kNetemReorderTbfChild);
  EXPECT_EQ(std::get<netlink::TbfOptions>(limited->nodes[1].options).rate, 125'000'000u);
  // The stage backends carry the flag in nothing: their residual is the same either way.
  auto tbf = plan_qdiscs(s, "tbf");
  ASSERT_TRUE(tbf);
  EXPECT_EQ(tbf->residual.jitter.ns, 2 * kMs);
}

TEST(ShapingBackends, HtbIsOneClassWithAByteLimitedLeaf) {
  auto p = plan_qdiscs(shape(5e9, 0, 0, 1), "htb");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->nodes.size(), 3u);
  EXPECT_EQ(p->nodes[0].handle, kHtbRoot);
  EXPECT_TRUE(p->nodes[0].create_only);
  EXPECT_EQ(std::get<netlink::HtbOptions>(p->nodes[0].options).default_class, 1u);
  EXPECT_EQ(p->nodes[1].parent, kHtbRoot);
  EXPECT_EQ(p->nodes[1].handle, kHtbClass);
  EXPECT_TRUE(p->nodes[1].is_class());
  const auto& c = std::get<netlink::HtbClassOptions>(p->nodes[1].options);
  EXPECT_EQ(c.rate, 625'000'000u);
  EXPECT_EQ(c.ceil, c.rate);
  EXPECT_EQ(c.burst, 625'000u);
  EXPECT_EQ(c.cburst, 625'000u);
  EXPECT_EQ(c.quantum, 200'000u);
  EXPECT_EQ(p->nodes[2].parent, kHtbClass);
  EXPECT_EQ(std::get<netlink::BfifoOptions>(p->nodes[2].options).limit, 3'750'000u);
  EXPECT_EQ(p->residual.loss_pct, 1);
  // Slow links: the quantum is never below a frame.
  auto slow = plan_qdiscs(shape(1e6), "htb");
  EXPECT_EQ(std::get<netlink::HtbClassOptions>(slow->nodes[1].options).quantum, 12'500u);
  auto slower = plan_qdiscs(shape(64e3), "htb");
  EXPECT_EQ(std::get<netlink::HtbClassOptions>(slower->nodes[1].options).quantum, 1514u);
}

TEST(ShapingBackends, EveryLayoutHasItsOwnRootHandle) {
  std::set<uint32_t> roots{kTbfRoot, kNetemTbfRoot,        kNetemRoot,
                           kHtbRoot, kNetemReorderTbfRoot, kNetemReorderRoot};
  EXPECT_EQ(roots.size(), 6u);
  // A change of figures within a layout keeps every handle: the kernel changes in place.
  for (const char* backend : {"netem", "tbf", "htb"}) {
    auto a = plan_qdiscs(shape(10e6, 5 * kMs), backend);
    auto b = plan_qdiscs(shape(100e6, 20 * kMs, 2 * kMs, 1), backend);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(a->nodes.size(), b->nodes.size()) << backend;
    for (size_t i = 0; i < a->nodes.size(); ++i) {
      EXPECT_EQ(a->nodes[i].handle, b->nodes[i].handle);
      EXPECT_EQ(a->nodes[i].parent, b->nodes[i].parent);
      EXPECT_EQ(a->nodes[i].kind(), b->nodes[i].kind());
    }
  }
}

TEST(ShapingOps, SetShapeTextAndJournalRoundTrip) {
  plan::SetShape op{"tb-x-a", "e0", shape(10e6, 5 * kMs, 1 * kMs, 0.25, 9000), "tbf"};
  EXPECT_EQ(plan::to_text(op),
            "shape  tb-x-a:e0  tbf rate 10Mbit delay 5ms jitter 1ms loss 0.25% mtu 9000");
  EXPECT_EQ(plan::op_netns(op), "tb-x-a");
  auto back = plan::op_from_json(plan::to_json(op));
  ASSERT_TRUE(back) << back.error().message;
  const auto* s = std::get_if<plan::SetShape>(&*back);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->netns, op.netns);
  EXPECT_EQ(s->ifname, op.ifname);
  EXPECT_EQ(s->backend, op.backend);
  EXPECT_EQ(s->shape, op.shape);
  EXPECT_EQ(plan::to_text(plan::SetShape{"n", "e1", shape(0), "netem"}),
            "shape  n:e1  netem rate unlimited mtu 1500");
  // jitter_mode = "reorder" travels with the shape, in the text and through the journal.
  plan::SetShape re{"n", "e1", shape(0, 5 * kMs, 1 * kMs), "netem"};
  re.shape.reorder = true;
  EXPECT_EQ(plan::to_text(re),
            "shape  n:e1  netem rate unlimited delay 5ms jitter 1ms reorder mtu 1500");
  auto re_back = plan::op_from_json(plan::to_json(re));
  ASSERT_TRUE(re_back);
  EXPECT_TRUE(std::get<plan::SetShape>(*re_back).shape.reorder);
  EXPECT_FALSE(std::get<plan::SetShape>(*back).shape.reorder);
}

TEST(ShapingOps, OnePerLinkDirection) {
  plan::Topology t;
  t.nodes.push_back(plan::Node{"hz/s0/g0", "tb-l-g0"});
  t.nodes.push_back(plan::Node{"hz/s0/nvsw", "tb-l-nvsw"});
  t.nodes.push_back(plan::Node{"hz/s0/g1", "tb-l-g1"});
  plan::Link l1;
  l1.a = {"hz/s0/g0", "nvl", std::nullopt};
  l1.b = {"hz/s0/nvsw", "g0", std::nullopt};
  l1.emulated.rate = Rate{5e9};
  l1.emulated.delay = Duration{20'000};
  l1.emulated.mtu = 9000;
  plan::Link l2 = l1;
  l2.a = {"hz/s0/g1", "nvl", std::nullopt};
  l2.b = {"hz/s0/nvsw", "g1", std::nullopt};
  l2.emulated.loss_pct = 0.1;
  t.links = {l1, l2};
  auto ops = shape_ops(t, "tbf");
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].netns, "tb-l-g0");
  EXPECT_EQ(ops[0].ifname, "nvl");
  EXPECT_EQ(ops[1].netns, "tb-l-nvsw");
  EXPECT_EQ(ops[1].ifname, "g0");
  EXPECT_EQ(ops[3].ifname, "g1");
  for (const auto& op : ops) EXPECT_EQ(op.backend, "tbf");
  EXPECT_EQ(ops[0].shape, shape(5e9, 20'000, 0, 0, 9000));
  EXPECT_EQ(ops[2].shape.loss_pct, 0.1);
  EXPECT_EQ(ops[0].shape, ops[1].shape);  // both directions carry the link's figures
}

}  // namespace
}  // namespace tb::shaping
