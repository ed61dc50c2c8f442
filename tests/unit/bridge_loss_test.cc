// Loss into a bridge port (issue 22 follow-up): the loss rule of a direction whose receiving
// port is a bridge port sits on that port, in the bridge's namespace, in an nft bridge family
// table (stage/netfilter_rules.h), not on the sender's egress where a drop is a local error.
// The delay's NFQUEUE rule stays on the sender's egress.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plan/plan.h"
#include "plan/shaping.h"
#include "plan_ops.h"
#include "stage/netfilter_rules.h"

namespace tb {
namespace {

using plan::ops_of;

TEST(BridgeLoss, RuleScriptIsInTheBridgeFamilyOnThePortsIngress) {
  EXPECT_EQ(stage::loss_rule_script({"s0", 20000, false, true}, "m loss"),
            "add table bridge tb_loss; add chain bridge tb_loss prerouting { type filter hook "
            "prerouting priority -300; policy accept; }; add rule bridge tb_loss prerouting iif "
            "\"s0\" numgen random mod 1000000 < 20000 counter drop comment \"m loss\"");
  // 100 % (a blackhole): no numgen.
  const std::string all = stage::loss_rule_script({"s0", 1'000'000, false, true}, "m blackhole");
  EXPECT_NE(all.find("add rule bridge tb_loss prerouting iif \"s0\" counter drop comment "
                     "\"m blackhole\""),
            std::string::npos)
      << all;
}

TEST(BridgeLoss, SwapDeletesByFamilyInOneScript) {
  // A bridge rule replacing a bridge rule: only the bridge table is declared.
  stage::MarkedRule old_br;
  old_br.kind = stage::MarkedRule::Kind::kLoss;
  old_br.family = "bridge";
  old_br.handle = 4;
  const std::string s = stage::loss_swap_script({"s0", 10, false, true}, "m loss", {old_br});
  EXPECT_EQ(s,
            "add table bridge tb_loss; add chain bridge tb_loss prerouting { type filter hook "
            "prerouting priority -300; policy accept; }; add rule bridge tb_loss prerouting iif "
            "\"s0\" numgen random mod 1000000 < 10 counter drop comment \"m loss\"; delete rule "
            "bridge tb_loss prerouting handle 4");
  // Loss 0 with an old inet rule in the list too: both tables declared, each delete in its own.
  stage::MarkedRule old_inet;
  old_inet.kind = stage::MarkedRule::Kind::kLoss;
  old_inet.chain = stage::kLossEgressChain;
  old_inet.handle = 9;
  const std::string off =
      stage::loss_swap_script({"s0", 0, false, true}, "m loss", {old_br, old_inet});
  EXPECT_EQ(off.find("add rule"), std::string::npos) << off;
  EXPECT_EQ(off.find("add table bridge tb_loss"), 0u) << off;
  EXPECT_NE(off.find("add table inet tb_loss"), std::string::npos) << off;
  EXPECT_NE(off.find("delete rule bridge tb_loss prerouting handle 4"), std::string::npos) << off;
  EXPECT_NE(off.find("delete rule inet tb_loss postrouting handle 9"), std::string::npos) << off;
  EXPECT_LT(off.find("add table inet"), off.find("delete rule")) << off;
  // An inet rule's script is what it was (one family declared).
  const std::string inet = stage::loss_swap_script({"vb", 10}, "m loss", {});
  EXPECT_EQ(inet.find("bridge"), std::string::npos) << inet;
  // A MarkedRule found before the family was recorded is an inet one.
  EXPECT_EQ(stage::MarkedRule{}.family, "inet");
}

// A server -> VPC link with a residual loss and delay (tbf): the queue rule on the server's
// egress, the loss rule on the VPC's port in the VPC's namespace, with a marker of its own.
TEST(BridgeLoss, PlannerPutsTheLossOnTheBridgePort) {
  plan::Plan p;
  p.lab = "blp";
  p.topo.nodes = {plan::Node{"s0", "tb-blp-s0", plan::NodeKind::kServer, "dc", 0, -1, {}},
                  plan::Node{"vpc", "tb-blp-vpc", plan::NodeKind::kVpc, "dc", -1, -1, {}}};
  plan::Link l;
  l.a = {"s0", "fe", std::nullopt, false};
  l.b = {"vpc", "s0", std::nullopt, true};
  l.emulated.rate = Rate{1e9};
  l.emulated.delay = Duration{2'000'000};
  l.emulated.loss_pct = 2;
  p.topo.links.push_back(l);
  ASSERT_TRUE(plan::add_shaping(p, "tbf"));
  const auto rules = ops_of<plan::AddStageRule>(p);
  // s0 -> vpc: queue on s0:fe egress (no loss there), loss on vpc:s0. vpc -> s0: both at
  // s0:fe ingress.
  ASSERT_EQ(rules.size(), 3u);
  bool queue_out = false, loss_port = false, in = false;
  for (const auto& r : rules) {
    if (r.netns == "tb-blp-s0" && r.ifname == "fe" && r.egress) {
      queue_out = true;
      EXPECT_GT(r.queue, 0) << r.marker;
      EXPECT_EQ(r.loss_ppm, 0u) << "a drop on the sender's egress is a local error";
      EXPECT_EQ(r.marker, plan::stage_rule_marker("blp", "fe", true));
    } else if (r.netns == "tb-blp-vpc" && r.ifname == "s0") {
      loss_port = true;
      EXPECT_FALSE(r.egress);
      EXPECT_EQ(r.queue, 0);
      EXPECT_EQ(r.loss_ppm, 20000u);
      EXPECT_EQ(r.marker, plan::stage_rule_marker("blp", "s0", false));
    } else if (r.netns == "tb-blp-s0" && r.ifname == "fe" && !r.egress) {
      in = true;
      EXPECT_EQ(r.loss_ppm, 20000u);
    } else {
      ADD_FAILURE() << plan::to_text(plan::Op{r});
    }
  }
  EXPECT_TRUE(queue_out && loss_port && in);
  // Loss only: no queue, so the sender's egress gets no rule at all.
  p.ops.clear();
  p.topo.links[0].emulated.delay = Duration{0};
  ASSERT_TRUE(plan::add_shaping(p, "tbf"));
  for (const auto& r : ops_of<plan::AddStageRule>(p))
    EXPECT_FALSE(r.egress) << plan::to_text(plan::Op{r});
}

}  // namespace
}  // namespace tb
