// A lab over several hosts, the planner's half (issue 19; the scenario's is
// scenario_hosts_test.cc): every node on its host, each link between hosts a VXLAN tunnel (VNI
// from the plan, MTU less the encapsulation), each host only its part, and a digest every host
// computes alike.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "multihost_text.h"
#include "plan/plan.h"
#include "scenario/loader.h"
#include "scenario_text.h"

namespace tb::plan {
namespace {

using scenario::testing_text::kBjWan;
using scenario::testing_text::kHead;
using scenario::testing_text::kTwoHosts;

scenario::Scenario multihost_load_ok(const std::string& text) {
  auto s = scenario::load_text(text, "x.toml");
  EXPECT_TRUE(s) << s.error().message;
  if (!s) return {};
  return std::move(*s);
}

HostCaps tbf_host() {
  return assumed_host("test host");
}

Plan plan_ok(const scenario::Scenario& s, const std::string& host = "",
             const HostCaps& caps = tbf_host()) {
  auto p = compile(s, caps, PlanOptions{"", "auto", "none", host});
  EXPECT_TRUE(p) << p.error().message;
  return p ? *p : Plan{};
}

std::vector<CreateVxlan> tunnels(const Plan& p) {
  std::vector<CreateVxlan> out;
  for (const auto& op : p.ops)
    if (const auto* v = std::get_if<CreateVxlan>(&op)) out.push_back(*v);
  return out;
}

std::string ops_text(const Plan& p) {
  std::string s;
  for (const auto& op : p.ops) s += to_text(op) + "\n";
  return s;
}

TEST(MultihostPlan, EveryNodeOnItsHostAndTheWanIsATunnel) {
  auto s = multihost_load_ok(std::string(kHead) + kBjWan + kTwoHosts);
  Plan p = plan_ok(s);
  for (const auto& n : p.topo.nodes) EXPECT_EQ(n.host, n.region == "hz" ? "a" : "b") << n.name;
  ASSERT_EQ(p.hosts.size(), 2u);
  EXPECT_EQ(p.hosts[0].gpus, 4);
  EXPECT_EQ(p.hosts[1].gpus, 2);
  int cross = 0;
  for (const auto& l : p.topo.links) {
    if (!l.vni) continue;
    ++cross;
    EXPECT_EQ(l.tier, Tier::kWan);
    EXPECT_EQ(l.vni, 10000u);
    EXPECT_EQ(l.emulated.mtu, l.real.mtu - kVxlanOverhead);
  }
  EXPECT_EQ(cross, 1);
  // Both ends, each on its own host, mirrored; no veth joins the hosts.
  auto t = tunnels(p);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].netns, "tb-t-hz-tr");
  EXPECT_EQ(t[0].host, "a");
  EXPECT_EQ(t[0].local.to_string(), "10.0.0.1");
  EXPECT_EQ(t[0].remote.to_string(), "10.0.0.2");
  EXPECT_EQ(t[1].netns, "tb-t-bj-tr");
  EXPECT_EQ(t[1].local.to_string(), "10.0.0.2");
  EXPECT_EQ(t[1].remote.to_string(), "10.0.0.1");
  EXPECT_EQ(t[0].vni, t[1].vni);
  EXPECT_EQ(t[0].port, 4789);
  EXPECT_EQ(t[0].mtu, t[0].mtu);
  for (const auto& op : p.ops) {
    if (const auto* v = std::get_if<CreateVeth>(&op)) {
      EXPECT_FALSE(v->a.netns.starts_with("tb-t-hz") && v->b.netns.starts_with("tb-t-bj"));
    }
  }
  // Shaping sees the tunnel's MTU.
  int shaped = 0;
  for (const auto& op : p.ops) {
    if (const auto* sh = std::get_if<SetShape>(&op); sh && sh->ifname == "ec") {
      EXPECT_EQ(sh->shape.mtu, t[0].mtu);
      ++shaped;
    }
  }
  EXPECT_EQ(shaped, 2);
}

TEST(MultihostPlan, EachHostGetsOnlyItsPartAndTheSameDigest) {
  auto s = multihost_load_ok(std::string(kHead) + kBjWan + kTwoHosts);
  Plan all = plan_ok(s), a = plan_ok(s, "a"), b = plan_ok(s, "b");
  EXPECT_EQ(a.host, "a");
  std::set<std::string> a_ns, b_ns;
  for (const auto& n : all.topo.nodes) (n.host == "a" ? a_ns : b_ns).insert(n.netns);
  for (const auto& op : a.ops) EXPECT_TRUE(a_ns.contains(op_netns(op))) << to_text(op);
  for (const auto& op : b.ops) EXPECT_TRUE(b_ns.contains(op_netns(op))) << to_text(op);
  // The two parts are the whole plan: nothing lost, nothing twice.
  EXPECT_EQ(a.ops.size() + b.ops.size(), all.ops.size());
  ASSERT_EQ(tunnels(a).size(), 1u);
  EXPECT_EQ(tunnels(a)[0].host, "a");
  // The same digest on every host, whatever its kernel offers.
  HostCaps netem = tbf_host();
  netem.netem = netem.htb = true;
  netem.probed = true;
  Plan b_netem = plan_ok(s, "b", netem);
  EXPECT_NE(ops_text(b_netem), ops_text(b));  // another backend: other shaping ops
  EXPECT_EQ(all.digest.size(), 16u);
  EXPECT_EQ(a.digest, all.digest);
  EXPECT_EQ(b.digest, all.digest);
  EXPECT_EQ(b_netem.digest, all.digest);
  // ... and another one when what hosts must agree on differs.
  auto moved =
      multihost_load_ok(std::string(kHead) + kBjWan +
                        "[[host]]\nname = \"a\"\nunderlay = \"10.0.0.1\"\nregions = [\"hz\"]\n"
                        "[[host]]\nname = \"b\"\nunderlay = \"10.0.0.3\"\nregions = [\"bj\"]\n");
  EXPECT_NE(plan_ok(moved).digest, all.digest);
  auto port = multihost_load_ok(std::string(kHead) + kBjWan + kTwoHosts + "[vxlan]\nport = 8472\n");
  EXPECT_NE(plan_ok(port).digest, all.digest);
}

TEST(MultihostPlan, AServerApartFromItsRegionTakesItsGpusAndTunnelsItsLinks) {
  auto s = multihost_load_ok(std::string(kHead) + kBjWan + kTwoHosts + "servers = [\"hz/s1\"]\n" +
                             "[vxlan]\nvni_base = 700\n");
  Plan p = plan_ok(s);
  EXPECT_EQ(p.topo.node("hz/s1")->host, "b");
  EXPECT_EQ(p.topo.node("hz/s1/g0")->host, "b");
  EXPECT_EQ(p.topo.node("hz/s0/g0")->host, "a");
  EXPECT_EQ(p.topo.node("hz/tor0")->host, "a");
  std::vector<uint32_t> vnis;
  std::map<Tier, int> tiers;
  for (const auto& l : p.topo.links)
    if (l.vni) {
      vnis.push_back(l.vni);
      ++tiers[l.tier];
    }
  // hz/s1's frontend link and its two GPUs' rail links cross, and the WAN; NVLink never does.
  EXPECT_EQ(vnis, (std::vector<uint32_t>{700, 701, 702, 703}));
  EXPECT_EQ(tiers[Tier::kFrontend], 1);
  EXPECT_EQ(tiers[Tier::kScaleOut], 2);
  EXPECT_EQ(tiers[Tier::kWan], 1);
  EXPECT_EQ(tiers[Tier::kScaleUp], 0);
  // The frontend tunnel's VPC end is a bridge port, as the veth's was.
  bool bridged = false;
  for (const auto& t : tunnels(p))
    if (t.netns == "tb-t-hz-vpc") bridged = t.master == "br" && t.host == "a";
  EXPECT_TRUE(bridged);
  const std::string text = hosts_text(p);
  EXPECT_HAS(text, "cross-host links: 4");
  EXPECT_HAS(text, "hz/s1:fe (b) <-> hz/vpc:s1 (a)");
  EXPECT_HAS(text, "servers hz/s1");
}

// The journal (down replays it) and the lab's state (status reads it) keep what multi-host adds:
// a tunnel end whole, each node's host, each link's VNI.
TEST(MultihostPlan, TunnelsHostsAndVnisRoundTripThroughJournalAndState) {
  auto s = multihost_load_ok(std::string(kHead) + kBjWan + kTwoHosts + "servers = [\"hz/s1\"]\n");
  Plan p = plan_ok(s);
  int tunnels_seen = 0;
  for (const auto& op : p.ops) {
    if (!std::holds_alternative<CreateVxlan>(op)) continue;
    ++tunnels_seen;
    auto j = to_json(op);
    auto back = op_from_json(j);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(to_json(*back), j);
    EXPECT_EQ(to_text(*back), to_text(op));
  }
  EXPECT_EQ(tunnels_seen, 8);  // 4 cross-host links, two ends each
  Topology back = topology_from_json(to_json(p.topo));
  ASSERT_EQ(back.nodes.size(), p.topo.nodes.size());
  for (size_t i = 0; i < back.nodes.size(); ++i)
    EXPECT_EQ(back.nodes[i].host, p.topo.nodes[i].host);
  for (size_t i = 0; i < back.links.size(); ++i) EXPECT_EQ(back.links[i].vni, p.topo.links[i].vni);
  EXPECT_EQ(digest(p.lab, p.hosts, p.vxlan_port, back), p.digest);
}

TEST(MultihostPlan, OneHostHoldingEverythingChangesNoOp) {
  auto none = multihost_load_ok(std::string(kHead) + kBjWan);
  auto one = multihost_load_ok(
      std::string(kHead) + kBjWan +
      "[[host]]\nname = \"a\"\nunderlay = \"10.0.0.1\"\nregions = [\"hz\", \"bj\"]\n");
  Plan pn = plan_ok(none), p1 = plan_ok(one), p1a = plan_ok(one, "a");
  EXPECT_EQ(ops_text(p1), ops_text(pn));
  EXPECT_EQ(ops_text(p1a), ops_text(pn));
  EXPECT_TRUE(tunnels(p1).empty());
  EXPECT_TRUE(pn.hosts.empty());
  EXPECT_EQ(hosts_text(pn), "");
}

TEST(MultihostPlan, HostFlagMustNameAHostOfTheScenario) {
  auto s = multihost_load_ok(std::string(kHead) + kBjWan + kTwoHosts);
  auto p = compile(s, tbf_host(), PlanOptions{"", "auto", "none", "c"});
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().exit_code, 2);
  EXPECT_HAS(p.error().message, "--host c: no [[host]] named \"c\" in x.toml; its hosts: a, b");
  auto none = multihost_load_ok(std::string(kHead) + kBjWan);
  auto q = compile(none, tbf_host(), PlanOptions{"", "auto", "none", "a"});
  ASSERT_FALSE(q);
  EXPECT_EQ(q.error().exit_code, 2);
  EXPECT_HAS(q.error().message, "declares no [[host]]");
}

// The shipped scenarios declare no hosts: their plans are what they were (the goldens in
// plan_golden_test.cc), and their digests are pinned here. A change to either is a change to
// what every host of a lab must agree on: regenerate with TB_UPDATE_GOLDENS=1 and review.
TEST(MultihostPlan, ShippedScenariosDigestsArePinned) {
  std::string got;
  for (const char* name :
       {"mini.toml", "hz-bj.toml", "ecmp.toml", "scale-across.toml", "vpc-vs-hpn.toml"}) {
    auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/" + name);
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_TRUE(s->hosts.empty());
    Plan p = plan_ok(*s);
    EXPECT_EQ(plan_ok(*s, "", assumed_host("another")).digest, p.digest);
    got += std::string(name) + " " + p.digest + "\n";
  }
  const std::string path = std::string(TB_SOURCE_DIR) + "/tests/unit/golden/digests.txt";
  if (const char* u = std::getenv("TB_UPDATE_GOLDENS"); u && std::string(u) == "1") {
    std::ofstream(path) << got;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing golden " << path;
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(got, want.str());
}

}  // namespace
}  // namespace tb::plan
