// Planner: determinism, names, addresses, routes; goldens for the shipped scenarios live in
// plan_golden_test.cc.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "plan/address.h"
#include "plan/plan.h"
#include "plan/rxe.h"
#include "plan_ops.h"
#include "scenario/loader.h"
#include "scenario/names.h"
#include "scenario/presets.h"

namespace tb::plan {
namespace {

scenario::Scenario two_regions(bool dual_tor) {
  scenario::Scenario s;
  s.file = "test.toml";
  s.lab = "t";
  for (const char* p : {"nvlink", "hpn", "vpc", "express-connect", "vpn"}) {
    auto pr = scenario::preset(p);
    if (!pr) {  // presets land with the loader; keep this test self-contained
      pr = scenario::LinkProfile{};
      pr->name = p;
      pr->rate = Rate{100e9};
      pr->mtu = 1500;
    }
    s.profiles[p] = *pr;
  }
  scenario::Region hz{"hz", "", 2, 4, 0, "nvlink", "hpn", dual_tor, 2, "", "vpc", {}};
  scenario::Region bj{"bj", "", 2, 2, 1, "nvlink", "hpn", false, 0, "", "vpc", {}};
  s.regions = {hz, bj};
  s.wans = {{"ec", "hz", "bj", "express-connect", scenario::WanRole::kPrimary, {}},
            {"vpn", "hz", "bj", "vpn", scenario::WanRole::kBackup, {}}};
  return s;
}

TEST(Address, AllocatorAlignsAndFails) {
  AddressAllocator a(*parse_prefix("198.18.0.0/24"));
  EXPECT_EQ(a.allocate(3, "x")->to_string(), "198.18.0.0/30");
  EXPECT_EQ(a.allocate(16, "y")->to_string(), "198.18.0.16/28");
  EXPECT_EQ(a.allocate(2, "z")->to_string(), "198.18.0.32/31");
  auto big = a.allocate(256, "the big one");
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("too small"), std::string::npos);
  EXPECT_EQ(big.error().exit_code, kExitBadInput);
}

TEST(Plan, IsDeterministic) {
  auto s = two_regions(true);
  auto a = compile(s), b = compile(s);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(to_text(*a), to_text(*b));
}

TEST(Plan, NodeAndLinkCounts) {
  auto p = compile(two_regions(true));
  ASSERT_TRUE(p) << p.error().message;
  // hz: tr vpc 2 spines 8 ToRs 2 servers 8 GPUs = 22; bj: tr vpc 1 ToR 2 servers 4 GPUs = 9
  EXPECT_EQ(p->topo.nodes.size(), 31u);
  // hz: uplink 1, tor-spine 16, fe 2, nvl 8, rail 16 = 43; bj: 1 + 0 + 2 + 4 + 4 = 11; wan 2
  EXPECT_EQ(p->topo.links.size(), 56u);
  std::set<std::string> netns;
  for (const auto& n : p->topo.nodes) netns.insert(n.netns);
  EXPECT_EQ(netns.size(), p->topo.nodes.size());
  EXPECT_TRUE(netns.contains("tb-t-hz-s1-g3"));
  EXPECT_TRUE(netns.contains("tb-t-hz-tor3b"));
  EXPECT_TRUE(netns.contains("tb-t-bj-tor0"));
}

TEST(Plan, InterfaceNamesFitAndAreUniquePerNamespace) {
  auto p = compile(two_regions(true));
  ASSERT_TRUE(p);
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& op : p->ops) {
    auto check = [&](const std::string& ns, const std::string& ifname) {
      EXPECT_LE(ifname.size(), 15u) << ifname;
      EXPECT_TRUE(seen.insert({ns, ifname}).second) << ns << ":" << ifname;
    };
    if (auto* v = std::get_if<CreateVeth>(&op)) {
      check(v->a.netns, v->a.ifname);
      check(v->b.netns, v->b.ifname);
      EXPECT_TRUE(v->a.alias.starts_with(owner_marker("t")));
    } else if (auto* b = std::get_if<CreateBridge>(&op)) {
      check(b->netns, b->ifname);
    }
  }
}

TEST(Plan, AddressesAreUniqueExceptUnnumberedRouterPorts) {
  auto p = compile(two_regions(true));
  ASSERT_TRUE(p);
  std::map<uint32_t, std::set<std::string>> owners;  // address -> namespaces holding it
  for (const auto& op : p->ops)
    if (auto* a = std::get_if<AddAddr>(&op)) {
      owners[a->addr.addr.value].insert(a->netns);
      EXPECT_TRUE(parse_prefix("198.18.0.0/15")->contains(a->addr.addr));
    }
  for (const auto& [addr, nss] : owners) EXPECT_EQ(nss.size(), 1u) << Ipv4{addr}.to_string();
}

TEST(Plan, DualTorGivesMultipathRailRoute) {
  auto p = compile(two_regions(true));
  ASSERT_TRUE(p);
  bool found = false;
  for (const auto& op : p->ops)
    if (auto* r = std::get_if<AddRoute>(&op); r && r->netns == "tb-t-hz-s0-g1" && r->src) {
      found = true;
      ASSERT_EQ(r->nexthops.size(), 2u);
      EXPECT_EQ(r->nexthops[0].ifname, "raila");
      EXPECT_EQ(r->nexthops[1].ifname, "railb");
      EXPECT_TRUE(r->nexthops[0].via && r->nexthops[1].via);
    }
  EXPECT_TRUE(found);
}

// ecmp_hash = "l4": policy 1 in exactly the region's namespaces that hold a multipath route
// (hz: GPUs and spines with dual ToRs, ToRs with 2 spines); "l3" leaves the kernel's default.
TEST(Plan, L4EcmpHashWhereMultipathRoutesAre) {
  auto s = two_regions(true);
  auto l3 = compile(s);
  ASSERT_TRUE(l3);
  for (const auto& op : ops_of<SetSysctl>(*l3))
    EXPECT_NE(op.key, "net/ipv4/fib_multipath_hash_policy") << op.netns;
  s.regions[0].ecmp_hash = "l4";
  auto p = compile(s);
  ASSERT_TRUE(p) << p.error().message;
  std::set<std::string> hashed;
  for (const auto& op : ops_of<SetSysctl>(*p))
    if (op.key == "net/ipv4/fib_multipath_hash_policy") {
      EXPECT_EQ(op.value, "1");
      EXPECT_TRUE(hashed.insert(op.netns).second) << "twice: " << op.netns;
    }
  std::set<std::string> multipath;
  for (const auto& op : ops_of<AddRoute>(*p))
    if (op.nexthops.size() > 1) multipath.insert(op.netns);
  EXPECT_EQ(hashed, multipath);
  // 2 x 4 GPUs, 2 spines, 4 rails x 2 ToRs in hz; nothing in bj (1 rail, 1 ToR, no spine).
  EXPECT_EQ(hashed.size(), 8u + 2u + 8u);
  EXPECT_TRUE(hashed.contains("tb-t-hz-tor0a"));
  EXPECT_TRUE(hashed.contains("tb-t-hz-spine1"));
  EXPECT_TRUE(hashed.contains("tb-t-hz-s1-g3"));
  for (const auto& ns : hashed) EXPECT_EQ(ns.rfind("tb-t-hz-", 0), 0u) << ns;
}

TEST(Plan, WanBackupHasHigherMetric) {
  auto p = compile(two_regions(false));
  ASSERT_TRUE(p);
  std::map<std::string, int> metric;
  for (const auto& op : p->ops)
    if (auto* r = std::get_if<AddRoute>(&op); r && r->netns == "tb-t-hz-tr" && r->metric)
      metric[r->nexthops[0].ifname] = r->metric;
  EXPECT_LT(metric.at("ec"), metric.at("vpn"));
}

TEST(Plan, HostsResolveByTier) {
  auto p = compile(two_regions(false));
  ASSERT_TRUE(p);
  const Node* g00 = p->topo.node("hz/s0/g0");
  const Node* g01 = p->topo.node("hz/s0/g1");
  const Node* g10 = p->topo.node("hz/s1/g0");
  const Node* bj = p->topo.node("bj/s0/g0");
  auto addr = [](const Node* n, const char* role) {
    for (const auto& [r, a] : n->addrs)
      if (r == role) return a.addr.to_string();
    return std::string("?");
  };
  for (const auto& op : p->ops)
    if (auto* h = std::get_if<WriteHosts>(&op); h && h->netns == g00->netns) {
      EXPECT_TRUE(h->content.starts_with("# " + owner_marker("t")));
      EXPECT_NE(h->content.find(addr(g01, "nvl") + "\thz-s0-g1 hz-s0-g1.nvl\n"), std::string::npos);
      EXPECT_NE(h->content.find(addr(g10, "rail") + "\thz-s1-g0 hz-s1-g0.rail\n"),
                std::string::npos);
      EXPECT_NE(h->content.find(addr(bj, "nvl") + "\tbj-s0-g0 bj-s0-g0.nvl\n"), std::string::npos);
      return;
    }
  FAIL() << "no hosts file for " << g00->netns;
}

TEST(Plan, SubMicrosecondDelayIsFlaggedNotEmulated) {
  auto s = two_regions(false);
  s.profiles["nvlink"].delay = Duration{100};
  auto p = compile(s);
  ASSERT_TRUE(p);
  for (const auto& l : p->topo.links)
    if (l.tier == Tier::kScaleUp) {
      EXPECT_EQ(l.emulated.delay.ns, 0);
      ASSERT_FALSE(l.emulated.notes.empty());
      EXPECT_NE(l.emulated.notes[0].find("not emulated"), std::string::npos);
      return;
    }
  FAIL();
}

TEST(Plan, TooSmallAddressSpaceIsBadInput) {
  auto s = two_regions(true);
  s.address_space = *parse_prefix("198.18.0.0/26");
  auto p = compile(s);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().exit_code, kExitBadInput);
  EXPECT_NE(p.error().message.find("too small"), std::string::npos);
}

TEST(Plan, OpJsonRoundTrips) {
  auto p = compile(two_regions(true));
  ASSERT_TRUE(p);
  for (const auto& op : p->ops) {
    if (std::holds_alternative<WriteHosts>(op)) continue;  // journal keeps only the marker line
    auto back = op_from_json(to_json(op));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(to_text(*back), to_text(op));
  }
}

TEST(Plan, CreateRxeAndEveryDaemonKindRoundTripThroughTheJournal) {
  auto hz = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/hz-bj.toml");
  ASSERT_TRUE(hz) << hz.error().message;
  HostCaps host = assumed_host("test");
  host.rxe = host.rxe_checked = true;
  std::set<std::string> kinds;
  for (const char* mode : {"bfd", "agent"}) {
    hz->failover.mode = mode;
    auto p = compile(*hz, host, PlanOptions{});
    ASSERT_TRUE(p) << p.error().message;
    for (const auto& op : p->ops) {
      if (!std::holds_alternative<CreateRxe>(op) && !std::holds_alternative<StartDaemon>(op))
        continue;
      auto j = to_json(op);
      kinds.insert(j.value("op", "") + " " + j.value("/daemon/kind"_json_pointer, ""));
      auto back = op_from_json(j);
      ASSERT_TRUE(back) << back.error().message;
      EXPECT_EQ(to_json(*back), j) << to_text(op);
    }
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"rxe ", "daemon stage", "daemon agent", "daemon router",
                                          "daemon fabric", "daemon congestion"}));
}

TEST(Plan, RxeDevicesFollowTheHostAndTheOption) {
  auto hz = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/hz-bj.toml");
  ASSERT_TRUE(hz);
  auto count = [](const Plan& p) {
    return std::ranges::count_if(
        p.ops, [](const Op& op) { return std::holds_alternative<CreateRxe>(op); });
  };
  HostCaps with = assumed_host("test");
  with.rxe = with.rxe_checked = true;
  with.rxe_detail = "checked";
  auto p = compile(*hz, with, PlanOptions{});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->rdma, "rxe");
  EXPECT_EQ(count(*p), static_cast<long>(rail_nics(p->topo).size()));
  EXPECT_EQ(count(*p), 36);  // hz: 16 GPUs x 2 ToR ports; bj: 4 GPUs x 1
  EXPECT_NE(p->rdma_why.find("36 rxe devices"), std::string::npos) << p->rdma_why;
  auto none = compile(*hz, with, PlanOptions{"", "auto", "none"});
  ASSERT_TRUE(none);
  EXPECT_EQ(count(*none), 0);
  EXPECT_EQ(none->rdma_why, "--rdma none");
  HostCaps without = with;
  without.rxe = false;
  without.rxe_detail = "no rxe here";
  auto tcp = compile(*hz, without, PlanOptions{});
  ASSERT_TRUE(tcp);
  EXPECT_EQ(count(*tcp), 0);
  EXPECT_EQ(tcp->rdma, "none");
  EXPECT_EQ(tcp->rdma_why, "no rxe here");
}

TEST(Plan, ShapingFollowsTheHostAndRefusesStagesWithoutNfqueue) {
  auto mini = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/mini.toml");
  ASSERT_TRUE(mini);
  HostCaps host = assumed_host("test");
  auto p = compile(*mini, host, PlanOptions{});
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->shaping, "tbf");
  EXPECT_FALSE(p->stages().empty());  // mini's links have delay: tbf leaves it to the stage
  host.netem = true;
  auto netem = compile(*mini, host, PlanOptions{});
  ASSERT_TRUE(netem);
  EXPECT_EQ(netem->shaping, "netem");
  // netem delays in the kernel: the only stage queues left mark ECN after the VPC's ecn ports
  // (no RED in the plan's host facts), with no delay of their own.
  EXPECT_FALSE(netem->stages().empty());
  for (const auto& st : netem->stages())
    for (const auto& q : st.queues) {
      EXPECT_GE(q.mark, 0) << q.link;
      EXPECT_EQ(q.delay.ns, 0) << q.link;
    }
  host.netem = host.nfqueue = false;
  auto refused = compile(*mini, host, PlanOptions{});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().exit_code, kExitBadInput);
  EXPECT_NE(refused.error().message.find("NFQUEUE"), std::string::npos);
  auto unshaped = compile(*mini, host, PlanOptions{"", "none", "auto"});
  ASSERT_TRUE(unshaped);
  EXPECT_TRUE(unshaped->stages().empty());
  auto bad = compile(*mini, host, PlanOptions{"Bad", "auto", "auto"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("--name"), std::string::npos);
  auto renamed = compile(*mini, assumed_host("test"), PlanOptions{"other", "auto", "auto"});
  ASSERT_TRUE(renamed);
  EXPECT_EQ(renamed->lab, "other");
}

// jitter_mode = "reorder" is netem's: planned for a host without netem, the plan is refused at
// the profile that asks for it; with netem the shape carries it.
TEST(Plan, ReorderingJitterIsRefusedWhereAStageWouldHoldIt) {
  auto s = scenario::load_text(R"([lab]
name = "t"

[profiles.wan]
preset = "vpc"
jitter = "100us"
jitter_mode = "reorder"

[[region]]
name = "hz"
servers = 1
gpus_per_server = 1
scale_up = "nvlink"
rail = "hpn"
frontend = "wan"
)",
                               "r.toml");
  ASSERT_TRUE(s) << s.error().message;
  auto refused = compile(*s, assumed_host("test"), PlanOptions{});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().exit_code, kExitBadInput);
  EXPECT_TRUE(refused.error().message.starts_with("r.toml:4:1: [profiles.wan] link "))
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("jitter_mode = \"reorder\" needs the netem backend"),
            std::string::npos);
  HostCaps host = assumed_host("test");
  host.netem = true;
  auto netem = compile(*s, host, PlanOptions{});
  ASSERT_TRUE(netem) << netem.error().message;
  int reordering = 0;
  for (const auto& op : netem->ops)
    if (const auto* sh = std::get_if<SetShape>(&op)) reordering += sh->shape.reorder;
  EXPECT_EQ(reordering, 4);  // the frontend and uplink links, both directions
}

TEST(Plan, ABackendAskedForByNameMustBeOnAProbedHost) {
  HostCaps host = assumed_host("test");  // tbf and htb, no netem
  // Not probed (a dry run for another host): taken as asked.
  auto asked = choose_shaping("netem", host);
  ASSERT_TRUE(asked) << asked.error().message;
  EXPECT_EQ(asked->backend, "netem");
  // Probed: refused before anything is built, naming what is missing and what would do.
  host.probed = true;
  auto refused = choose_shaping("netem", host);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().exit_code, kExitBadInput);
  EXPECT_EQ(refused.error().message,
            "--shaping netem: this kernel has no working netem (see `testbedctl doctor`); use "
            "auto, none, tbf, htb");
  EXPECT_EQ(choose_shaping("htb", host)->backend, "htb");
  EXPECT_EQ(choose_shaping("none", host)->backend, "none");
  host.netem = true;
  EXPECT_EQ(choose_shaping("netem", host)->backend, "netem");
}

}  // namespace
}  // namespace tb::plan

namespace tb {
// The congestion agent's config (issue 32) survives the journal's JSON: every field of a port
// and of an upstream comes back, and the kind names it.
TEST(Daemon, CongestionAgentRoundTripsThroughJson) {
  plan::CongestionAgent c;
  c.netns = "tb-l-dc-tor0";
  c.poll_ns = 2'000'000;
  c.action = "forward";
  c.ports.push_back({"dc/tor0:s4g0",
                     "tb-l-dc-tor0",
                     "s4g0",
                     0x10000,
                     0xffffffff,
                     "lossless",
                     155'000,
                     55'000,
                     0,
                     0,
                     0,
                     {0, 1}});
  c.ports.back().rate = 50'000'000;  // its TBF, for a pfc-storm's hold (P8)
  c.ports.back().burst = 50'000;
  c.ports.back().limit = 2'190'000;
  c.ports.back().mtu = 4200;
  c.ports.push_back(
      {"dc/vpc:s0", "tb-l-dc-vpc", "s0", 0x10000, 0xffffffff, "ecn", 0, 0, 3000, 6000, 0.01, {}});
  c.upstreams.push_back({"dc/s0/g0:rail", "tb-l-dc-s0-g0", "rail", 0x10000, 0xffffffff, 50'000'000,
                         50'000, 16 << 20, 1500, 84'000'000, "s0g0", -1});
  c.upstreams.push_back({"dc/tor0:sp0", "tb-l-dc-tor0", "sp0", 0x10000, 0xffffffff, 50'000'000,
                         50'000, 300'000, 4214, 84'000'000, "sp0", 1});
  const auto j = plan::to_json(plan::Daemon{c});
  EXPECT_EQ(j["kind"], "congestion");
  auto back = plan::daemon_from_json(j);
  ASSERT_TRUE(back) << back.error().message;
  const auto* b = std::get_if<plan::CongestionAgent>(&*back);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(plan::to_json(*b), plan::to_json(c));
  EXPECT_EQ(b->ports[0].feeders, (std::vector<int>{0, 1}));
  EXPECT_EQ(b->upstreams[1].port, 1);
  EXPECT_DOUBLE_EQ(b->ports[1].pmax, 0.01);
  EXPECT_EQ(b->ports[0].limit, 2'190'000u);
  EXPECT_EQ(b->ports[0].mtu, 4200u);
  EXPECT_EQ(plan::daemon_name(*back), "congestion");
  // A config written before P8 has no port figures: they read as unknown (0), MTU 1500.
  auto old_j = plan::to_json(c);
  for (auto& p : old_j["ports"])
    for (const char* k : {"rate", "burst", "limit", "mtu"}) p.erase(k);
  const auto old_c = plan::congestion_from_json(old_j);
  EXPECT_EQ(old_c.ports[0].rate, 0u);
  EXPECT_EQ(old_c.ports[0].mtu, 1500u);
}
}  // namespace tb
