// plan/shaping.h add_shaping: which link directions get a qdisc, which a delay stage queue, and
// where the stage's rule sits (ingress, or egress when the receiving port is a bridge port).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "plan/plan.h"
#include "plan/shaping.h"
#include "plan_ops.h"
#include "scenario/loader.h"

namespace tb::shaping {
namespace {

plan::Plan hzbj() {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/hz-bj.toml");
  EXPECT_TRUE(s) << s.error().message;
  auto p = plan::compile(*s);
  EXPECT_TRUE(p) << p.error().message;
  return *p;
}

using plan::ops_of;

TEST(LabShaping, TbfLeavesDelayToStagesAtTheRightEnd) {
  auto p = hzbj();
  ASSERT_TRUE(add_shaping(p, "tbf"));
  EXPECT_EQ(p.shaping, "tbf");
  // WAN: received on each transit router's WAN port, 25 ms (Express Connect) / 30 ms (VPN).
  bool ec = false;
  for (const auto& st : p.stages())
    for (const auto& q : st.queues)
      if (q.link.find(":ec -> ") != std::string::npos) {
        ec = true;
        EXPECT_EQ(q.delay.ns, 25'000'000) << q.link;
        EXPECT_GE(q.maxlen, 1024u);
      }
  EXPECT_TRUE(ec);
  // Frontend server -> VPC: the VPC port is a bridge port, so the rule is the server's egress.
  bool egress = false;
  for (const auto& r : ops_of<plan::AddStageRule>(p)) {
    if (r.netns == "tb-hzbj-hz-s0" && r.ifname == "fe" && r.egress) egress = true;
    EXPECT_FALSE(r.netns == "tb-hzbj-hz-vpc" && r.ifname.starts_with("s")) << "bridge port";
    EXPECT_TRUE(r.marker.starts_with(plan::owner_marker("hzbj") + " ")) << r.marker;
  }
  EXPECT_TRUE(egress);
  // NVLink at 7.2 Gbit is rate-limited; nothing of it reaches a stage (100 ns not emulated).
  bool nvl = false;
  for (const auto& s : ops_of<plan::SetShape>(p))
    if (s.ifname == "nvl") {
      nvl = true;
      EXPECT_DOUBLE_EQ(s.shape.rate.bps, 7.2e9);
    }
  EXPECT_TRUE(nvl);
  // Delayed WAN: GPU namespaces get TCP buffers for the bandwidth-delay product.
  bool tcp = false;
  for (const auto& s : ops_of<plan::SetSysctl>(p))
    tcp = tcp || (s.netns == "tb-hzbj-hz-s0-g0" && s.key == "net/ipv4/tcp_rmem");
  EXPECT_TRUE(tcp);
}

// netem delays in the kernel: no stage delays anything; the stage queues left only mark ECN
// after the VPC's ecn ports (their rules steer only those directions).
TEST(LabShaping, NetemNeedsNoStage) {
  auto p = hzbj();
  ASSERT_TRUE(add_shaping(p, "netem"));
  for (const auto& st : p.stages())
    for (const auto& q : st.queues) {
      EXPECT_GE(q.mark, 0) << q.link;
      EXPECT_EQ(q.delay.ns, 0) << q.link;
      EXPECT_EQ(q.jitter.ns, 0) << q.link;
    }
  EXPECT_FALSE(ops_of<plan::SetShape>(p).empty());
  // With the VPC drop-tail nothing is left for a stage.
  auto d = hzbj();
  for (auto& l : d.topo.links) l.emulated.congestion = {};
  ASSERT_TRUE(add_shaping(d, "netem"));
  EXPECT_TRUE(d.stages().empty());
  EXPECT_TRUE(ops_of<plan::AddStageRule>(d).empty());
}

TEST(LabShaping, NoneAddsNothingAndUnknownIsBadInput) {
  auto p = hzbj();
  const size_t n = p.ops.size();
  ASSERT_TRUE(add_shaping(p, "none"));
  EXPECT_EQ(p.ops.size(), n);
  auto r = add_shaping(p, "cake");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().exit_code, kExitBadInput);
  EXPECT_NE(r.error().message.find("netem"), std::string::npos);
}

// Two switches joined by a delayed link: neither end reaches IP, so no stage rule could hold it.
plan::Plan two_bridges(Duration delay, double loss = 0) {
  plan::Plan p;
  p.lab = "bb";
  p.topo.nodes = {plan::Node{"sw1", "tb-bb-sw1", plan::NodeKind::kTor, "dc", -1, 0, {}},
                  plan::Node{"sw2", "tb-bb-sw2", plan::NodeKind::kTor, "dc", -1, 1, {}}};
  plan::Link l;
  l.a = {"sw1", "p2", std::nullopt, true};
  l.b = {"sw2", "p1", std::nullopt, true};
  l.profile = "trunk";
  l.emulated.rate = Rate{1e9};
  l.emulated.delay = delay;
  l.emulated.loss_pct = loss;
  p.topo.links.push_back(l);
  return p;
}

TEST(LabShaping, ALinkBetweenTwoBridgesIsRefusedWhereAStageWouldHoldIt) {
  for (const char* backend : {"tbf", "htb"}) {
    auto p = two_bridges(Duration{5'000'000});
    auto r = plan::add_shaping(p, backend, [](const plan::Link& l) {
      return "lab.toml:7:1: [profiles." + l.profile + "] ";
    });
    ASSERT_FALSE(r) << backend;
    EXPECT_EQ(r.error().exit_code, kExitBadInput);
    EXPECT_TRUE(
        r.error().message.starts_with("lab.toml:7:1: [profiles.trunk] link sw1:p2 <-> "
                                      "sw2:p1"))
        << r.error().message;
    EXPECT_NE(r.error().message.find("both ends are bridge ports"), std::string::npos);
    EXPECT_NE(r.error().message.find("delay 5ms"), std::string::npos);
    EXPECT_NE(r.error().message.find("netem"), std::string::npos);
  }
  // Loss alone also needs a stage rule.
  auto lossy = two_bridges(Duration{0}, 0.5);
  auto r = plan::add_shaping(lossy, "tbf");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("loss 0.5%"), std::string::npos) << r.error().message;
  // netem holds it in the sender's qdisc, bridge port or not; a rate alone is tbf's.
  auto p = two_bridges(Duration{5'000'000});
  EXPECT_TRUE(plan::add_shaping(p, "netem"));
  EXPECT_TRUE(p.stages().empty());
  auto rate_only = two_bridges(Duration{0});
  EXPECT_TRUE(plan::add_shaping(rate_only, "tbf"));
  EXPECT_TRUE(ops_of<plan::AddStageRule>(rate_only).empty());
}

// A sender whose egress holds the stage's delay (the receiver is a bridge port) gets TCP small
// queue room for it (plan/shaping.cc add_tsq_sysctls; tests/netns/delay_stage_test.cc measures).
TEST(LabShaping, AnEgressHoldOfAMillisecondOrMoreWidensTheSendersTcpSmallQueues) {
  auto planned = [](Duration delay, Duration jitter) {
    plan::Plan p;
    p.lab = "tsq";
    p.topo.nodes = {plan::Node{"s0", "tb-tsq-s0", plan::NodeKind::kServer, "dc", 0, -1, {}},
                    plan::Node{"vpc", "tb-tsq-vpc", plan::NodeKind::kVpc, "dc", -1, -1, {}}};
    plan::Link l;
    l.a = {"s0", "fe", std::nullopt, false};
    l.b = {"vpc", "s0", std::nullopt, true};
    l.emulated.rate = Rate{1e9};
    l.emulated.delay = delay;
    l.emulated.jitter = jitter;
    p.topo.links.push_back(l);
    EXPECT_TRUE(plan::add_shaping(p, "tbf"));
    return p;
  };
  auto sysctls = [&](Duration delay, Duration jitter) {
    plan::Plan p = planned(delay, jitter);
    std::map<std::string, std::string> out;
    for (const auto& s : ops_of<plan::SetSysctl>(p)) {
      EXPECT_EQ(s.netns, "tb-tsq-s0") << s.key;  // the sender; the bridge's side holds nothing
      out[s.key] = s.value;
    }
    return out;
  };
  // 2.5 ms (10 x the vpc preset): pacing ratios covering twice the hold in 1.024 ms windows,
  // and twice the 312.5 kB held when that is above the kernel's 4 MiB.
  auto s = sysctls(Duration{2'500'000}, Duration{0});
  EXPECT_EQ(s["net/ipv4/tcp_pacing_ca_ratio"], "489");
  EXPECT_EQ(s["net/ipv4/tcp_pacing_ss_ratio"], "489");
  EXPECT_EQ(s["net/ipv4/tcp_limit_output_bytes"], "4194304");
  // 20 ms +- 2 ms holds up to 28 ms: the ratio stops at the sysctl's 1000%, the bytes follow.
  s = sysctls(Duration{20'000'000}, Duration{2'000'000});
  EXPECT_EQ(s["net/ipv4/tcp_pacing_ca_ratio"], "1000");
  EXPECT_EQ(s["net/ipv4/tcp_limit_output_bytes"], "7000000");
  // The vpc preset's own 250 us: nothing (1 ms of pacing rate covers it).
  s = sysctls(Duration{250'000}, Duration{0});
  EXPECT_EQ(s.count("net/ipv4/tcp_pacing_ca_ratio"), 0u);
  EXPECT_EQ(s.count("net/ipv4/tcp_limit_output_bytes"), 0u);
  EXPECT_TRUE(planned(Duration{250'000}, Duration{0}).topo.links[0].emulated.notes.empty());
  // What the sysctls cannot do is said where status shows a link's notes.
  const auto notes = planned(Duration{2'500'000}, Duration{0}).topo.links[0].emulated.notes;
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("held on s0:fe's egress"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("(bbr)"), std::string::npos) << notes[0];
}

// jitter_mode = "reorder" is netem's; the stage releases packets in the order they came.
TEST(LabShaping, ReorderingJitterNeedsNetem) {
  plan::Plan p = two_bridges(Duration{0});
  p.topo.links[0].b.bridged = false;
  p.topo.links[0].emulated.delay = Duration{5'000'000};
  p.topo.links[0].emulated.jitter = Duration{1'000'000};
  p.topo.links[0].emulated.reorder = true;
  // Saved with the lab's state and read back (status, live changes).
  EXPECT_TRUE(plan::topology_from_json(plan::to_json(p.topo)).links[0].emulated.reorder);
  EXPECT_FALSE(plan::topology_from_json(plan::to_json(two_bridges(Duration{0}).topo))
                   .links[0]
                   .emulated.reorder);
  plan::Plan with_netem = p;
  ASSERT_TRUE(plan::add_shaping(with_netem, "netem"));
  for (const auto& s : ops_of<plan::SetShape>(with_netem)) EXPECT_TRUE(s.shape.reorder);
  auto r = plan::add_shaping(p, "tbf");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().exit_code, kExitBadInput);
  EXPECT_NE(r.error().message.find("jitter_mode = \"reorder\" needs the netem backend"),
            std::string::npos)
      << r.error().message;
  // Without jitter there is nothing to reorder: the stage may hold the delay.
  p.topo.links[0].emulated.jitter = Duration{0};
  EXPECT_TRUE(plan::add_shaping(p, "tbf"));
}

TEST(LabShaping, GoldenTbfPlanForHzBj) {
  auto p = hzbj();
  ASSERT_TRUE(add_shaping(p, "tbf"));
  const std::string text = plan::to_text(p);
  const std::string path = std::string(TB_SOURCE_DIR) + "/tests/unit/golden/hz-bj-tbf.plan";
  if (const char* u = std::getenv("TB_UPDATE_GOLDENS"); u && std::string(u) == "1") {
    std::ofstream(path) << text;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(text, want.str());
}

}  // namespace
}  // namespace tb::shaping
