// QoS classes on WAN links, without root: [qos] in the scenario loader (defaults, overrides and
// each error at its file:line:col), the HTB class tree and DSCP filters each backend builds
// (shares, ceilings, priorities, handles, the default class, netem's layout), validation, and
// the plan: every WAN link's SetShape carries the classes, in its text and through the journal
// and the lab state's topology.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "plan/emulate.h"
#include "plan/plan.h"
#include "plan/shaping.h"
#include "scenario/loader.h"
#include "scenario_text.h"
#include "shaping/backend.h"
#include "shaping/sizing.h"

namespace tb {
namespace {

using scenario::testing_text::kHead;
using scenario::testing_text::load_error;

shaping::LinkShape wan_shape(double bps, int64_t delay_ns = 25'000'000) {
  shaping::LinkShape s{Rate{bps}, Duration{delay_ns}, Duration{0}, 0, 1500};
  s.qos = plan::qos_classes(scenario::Qos{});
  return s;
}

TEST(QosScenario, DefaultsFollowTheWhitePapersIntent) {
  auto s = scenario::load_text(kHead, "x.toml");
  ASSERT_TRUE(s) << s.error().message;
  const scenario::Qos& q = s->qos;
  EXPECT_TRUE(q.enabled);
  ASSERT_EQ(q.classes.size(), 3u);
  EXPECT_EQ(q.classes[0].name, "gold");
  EXPECT_EQ(q.classes[0].priority, 0);
  EXPECT_EQ(q.dscp_of("gold"), 46);    // EF
  EXPECT_EQ(q.dscp_of("silver"), 18);  // AF21
  EXPECT_EQ(q.dscp_of("bronze"), 8);   // CS1
  EXPECT_EQ(q.dscp_of(""), 0);
  // Control traffic (CS6) is gold; unmarked traffic is silver.
  EXPECT_NE(std::ranges::find(q.classes[0].dscp, 48), q.classes[0].dscp.end());
  EXPECT_EQ(q.default_class, "silver");
  double total = 0;
  for (const auto& c : q.classes) total += c.share;
  EXPECT_LE(total, 1.0);
}

TEST(QosScenario, ClassesAreConfigurable) {
  auto s = scenario::load_text(std::string(kHead) + R"(
[qos]
default = "bronze"

[qos.gold]
share = "10%"
ceiling = "40%"
priority = 1
dscp = [46, 34]

[qos.bronze]
dscp = 1
)",
                               "x.toml");
  ASSERT_TRUE(s) << s.error().message;
  const auto& g = *s->qos.find("gold");
  EXPECT_DOUBLE_EQ(g.share, 0.1);
  EXPECT_DOUBLE_EQ(g.ceiling, 0.4);
  EXPECT_EQ(g.priority, 1);
  EXPECT_EQ(g.dscp, (std::vector<int>{46, 34}));
  EXPECT_EQ(s->qos.find("bronze")->dscp, (std::vector<int>{1}));
  EXPECT_DOUBLE_EQ(s->qos.find("silver")->share, 0.5);  // untouched: its default
  EXPECT_EQ(s->qos.default_class, "bronze");
  auto off = scenario::load_text(std::string(kHead) + "[qos]\nenabled = false\n", "x.toml");
  ASSERT_TRUE(off);
  EXPECT_FALSE(off->qos.enabled);
  EXPECT_TRUE(plan::qos_classes(off->qos).empty());
}

TEST(QosScenario, EachBadFieldIsNamedAtItsPlace) {
  const std::string m = load_error(std::string(kHead) + R"(
[qos]
default = "platinum"
extra = 1

[qos.gold]
share = "0%"
priority = 9
dscp = [46, 64, "ef"]

[qos.silver]
ceiling = "20%"
dscp = [8]
)");
  EXPECT_HAS(m, "x.toml:13:11: qos: default:");
  EXPECT_HAS(m, "use one of: gold, silver, bronze");
  EXPECT_HAS(m, "x.toml:14:1: unknown key \"extra\" in [qos]");
  EXPECT_HAS(m, "x.toml:17:9: qos.gold: share: must be above 0%");
  EXPECT_HAS(m, "x.toml:18:12: qos.gold: priority:");
  EXPECT_HAS(m, "x.toml:19:13: qos.gold: dscp: each value must be an integer 0..63");
  EXPECT_HAS(m, "x.toml:19:17: qos.gold: dscp: each value must be an integer 0..63");
  EXPECT_HAS(m, "x.toml:22:11: qos.silver: ceiling: the ceiling (20%) must be at least the share");
  EXPECT_HAS(m, "qos.bronze: dscp: 8 is already in class \"silver\"");
  // Shares above the whole link.
  const std::string over = load_error(std::string(kHead) + R"(
[qos.gold]
share = "60%"
)");
  EXPECT_HAS(over, "x.toml:12:1: qos: the classes' shares add up to 130%");
}

TEST(QosTree, TbfBackendBuildsHtbClassesUnderTheLinksRate) {
  const auto s = wan_shape(400e6);  // hz-bj's Express Connect at scale 1000
  auto p = shaping::plan_qdiscs(s, "tbf");
  ASSERT_TRUE(p) << p.error().message;
  const uint64_t rate = 50'000'000;  // bytes/s
  // htb 7: root, 7:1 the link, then per class its class and leaf.
  ASSERT_EQ(p->nodes.size(), 2u + 2 * 3);
  EXPECT_EQ(p->nodes[0].handle, shaping::kQosHtbRoot);
  EXPECT_EQ(p->nodes[0].parent, shaping::kRootParent);
  EXPECT_TRUE(p->nodes[0].create_only);
  // Unmarked traffic goes to silver, 7:20.
  EXPECT_EQ(std::get<netlink::HtbOptions>(p->nodes[0].options).default_class, 0x20u);
  const auto& top = std::get<netlink::HtbClassOptions>(p->nodes[1].options);
  EXPECT_EQ(p->nodes[1].handle, 0x70001u);
  EXPECT_EQ(top.rate, rate);
  EXPECT_EQ(top.ceil, rate);
  uint64_t guaranteed = 0;
  const std::vector<std::pair<uint64_t, uint32_t>> want = {
      {rate * 3 / 10, 0}, {rate / 2, 1}, {rate / 5, 2}};  // share, prio
  for (size_t i = 0; i < 3; ++i) {
    const auto& cls = p->nodes[2 + 2 * i];
    const auto& leaf = p->nodes[3 + 2 * i];
    EXPECT_EQ(cls.parent, 0x70001u);
    EXPECT_EQ(cls.handle, 0x70000u | static_cast<uint32_t>(0x10 * (i + 1)));
    const auto& c = std::get<netlink::HtbClassOptions>(cls.options);
    EXPECT_EQ(c.rate, want[i].first) << i;
    EXPECT_EQ(c.ceil, rate) << i;  // every default ceiling is the whole link
    EXPECT_EQ(c.prio, want[i].second) << i;
    EXPECT_GE(c.quantum, shaping::frame_bytes(1500));
    EXPECT_LE(c.quantum, 200'000u);
    guaranteed += c.rate;
    EXPECT_EQ(leaf.parent, cls.handle);
    EXPECT_EQ(leaf.handle, shaping::tc_handle(0x71 + static_cast<uint32_t>(i)));
    EXPECT_EQ(std::get<netlink::BfifoOptions>(leaf.options).limit, shaping::limit_bytes(s));
  }
  EXPECT_LE(guaranteed, rate);
  // One filter per DSCP value, each to its class, on the htb, with distinct handles.
  ASSERT_EQ(p->filters.size(), 3u + 3 + 2);
  std::set<uint32_t> handles;
  std::map<int, uint32_t> to;
  for (const auto& f : p->filters) {
    EXPECT_EQ(f.f.parent, shaping::kQosHtbRoot);
    handles.insert(f.f.handle);
    to[f.f.dscp] = f.f.classid;
  }
  EXPECT_EQ(handles.size(), p->filters.size());
  EXPECT_EQ(to[46], 0x70010u);
  EXPECT_EQ(to[48], 0x70010u);  // CS6: BFD, BGP, the failover agent
  EXPECT_EQ(to[18], 0x70020u);
  EXPECT_EQ(to[8], 0x70030u);
  // The delay stays with the userspace stage, as without classes.
  EXPECT_EQ(p->residual.delay.ns, 25'000'000);
  const std::string text = shaping::to_text(*p);
  EXPECT_HAS(text, "class htb 7:30 parent 7:1 rate 80Mbit ceil 400Mbit");
  EXPECT_HAS(text, "prio 2 (bronze)");
  EXPECT_HAS(text,
             "filter u32 parent 7: protocol ip prio 1 handle 800::1 match ip dsfield 0xb8 0xfc "
             "classid 7:10 (gold)");
  // The htb backend builds the same tree.
  auto h = shaping::plan_qdiscs(s, "htb");
  ASSERT_TRUE(h);
  EXPECT_EQ(shaping::to_text(*h), text);
}

TEST(QosTree, NetemHoldsTheDelayLineAboveTheClasses) {
  for (bool reorder : {false, true}) {
    auto s = wan_shape(1e6, 30'000'000);
    s.reorder = reorder;
    auto p = shaping::plan_qdiscs(s, "netem");
    ASSERT_TRUE(p);
    ASSERT_EQ(p->nodes.size(), 1u + 2 + 2 * 3);
    const uint32_t root = reorder ? shaping::kNetemReorderQosRoot : shaping::kNetemQosRoot;
    const uint32_t htb = reorder ? shaping::kNetemReorderQosHtb : shaping::kNetemQosHtb;
    EXPECT_EQ(p->nodes[0].handle, root);
    EXPECT_EQ(p->nodes[0].kind(), "netem");
    const auto& n = std::get<netlink::NetemOptions>(p->nodes[0].options);
    EXPECT_EQ(n.delay_ns, 30'000'000);
    // netem's packet limit covers every class's buffer behind it.
    EXPECT_GE(uint64_t{n.limit} * shaping::frame_bytes(1500),
              3 * uint64_t{shaping::limit_bytes(s)});
    EXPECT_EQ(p->nodes[1].parent, root | 1);
    EXPECT_EQ(p->nodes[1].handle, htb);
    EXPECT_EQ(p->nodes[1].kind(), "htb");
    EXPECT_EQ(p->nodes[2].parent, htb);
    EXPECT_EQ(std::get<netlink::HtbClassOptions>(p->nodes[2].options).rate, 125'000u);
    for (const auto& f : p->filters) EXPECT_EQ(f.f.parent, htb);
    EXPECT_TRUE(p->residual.empty());
  }
  // Every layout root stays distinct, so a change between them grafts a new tree.
  std::set<uint32_t> roots{
      shaping::kTbfRoot,    shaping::kNetemTbfRoot,        shaping::kNetemRoot,
      shaping::kHtbRoot,    shaping::kNetemReorderTbfRoot, shaping::kNetemReorderRoot,
      shaping::kQosHtbRoot, shaping::kNetemQosRoot,        shaping::kNetemReorderQosRoot};
  EXPECT_EQ(roots.size(), 9u);
}

TEST(QosTree, AnUnlimitedLinkHasNoClassesAndBadClassesAreBadInput) {
  auto p = shaping::plan_qdiscs(wan_shape(0, 0), "tbf");
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->nodes.empty());
  EXPECT_TRUE(p->filters.empty());
  auto bad = [](auto edit) {
    auto s = wan_shape(1e6);
    edit(s.qos);
    auto r = shaping::plan_qdiscs(s, "tbf");
    EXPECT_FALSE(r);
    return r ? std::string() : r.error().message;
  };
  EXPECT_HAS(bad([](shaping::Qos& q) { q.classes[0].share = 0.9; }), "add up to 160%");
  EXPECT_HAS(bad([](shaping::Qos& q) { q.classes[1].ceiling = 0.1; }), "ceiling 10%");
  EXPECT_HAS(bad([](shaping::Qos& q) { q.classes[2].priority = 8; }), "priority 8");
  EXPECT_HAS(bad([](shaping::Qos& q) { q.classes[2].dscp.push_back(46); }),
             "DSCP 46 is already in class \"gold\"");
  EXPECT_HAS(bad([](shaping::Qos& q) { q.default_class = 3; }), "default class");
}

TEST(QosPlan, EveryWanLinkCarriesTheClassesThroughTextJournalAndState) {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/hz-bj.toml");
  ASSERT_TRUE(s) << s.error().message;
  auto p = plan::compile(*s, plan::assumed_host("unit"), plan::PlanOptions{});
  ASSERT_TRUE(p) << p.error().message;
  int wan_shapes = 0;
  for (const auto& op : p->ops) {
    const auto* sh = std::get_if<plan::SetShape>(&op);
    if (!sh) continue;
    const bool wan = sh->ifname == "ec" || sh->ifname == "vpn";
    EXPECT_EQ(!sh->shape.qos.empty(), wan) << plan::to_text(op);
    if (!wan) continue;
    ++wan_shapes;
    EXPECT_HAS(plan::to_text(op),
               "qos gold 30%..100% prio 0 dscp 46,48,56, silver 50%..100% "
               "prio 1 dscp 18,10,26 (default), bronze 20%..100% prio 2 dscp 8,1");
    auto back = plan::op_from_json(plan::to_json(op));
    ASSERT_TRUE(back);
    EXPECT_EQ(std::get<plan::SetShape>(*back).shape, sh->shape);
  }
  EXPECT_EQ(wan_shapes, 4);  // ec and vpn, both directions
  auto topo = plan::topology_from_json(plan::to_json(p->topo));
  for (const auto& l : topo.links)
    EXPECT_EQ(!l.emulated.qos.empty(), l.tier == plan::Tier::kWan) << l.a.node << " " << l.b.node;
  // [qos] enabled = false: plain rate limits.
  s->qos.enabled = false;
  auto off = plan::compile(*s, plan::assumed_host("unit"), plan::PlanOptions{});
  ASSERT_TRUE(off);
  for (const auto& op : off->ops) {
    if (const auto* sh = std::get_if<plan::SetShape>(&op)) {
      EXPECT_TRUE(sh->shape.qos.empty());
    }
  }
}

}  // namespace
}  // namespace tb
