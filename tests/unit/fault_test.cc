// Faults without root: resolving scenario faults against a lab's topology, the timeline's
// steps, and the recovery analysis on synthetic timestamps.
#include <gtest/gtest.h>

#include <fstream>

#include "experiment/experiment.h"
#include "experiment/probes.h"
#include "failover/fabric.h"
#include "failover/frr.h"
#include "fault/fault.h"
#include "fault/link_ops.h"
#include "metrics/recovery.h"
#include "plan/plan.h"
#include "scenario/loader.h"

namespace tb {
namespace {

lab::LabState lab_of(const std::string& scenario) {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/" + scenario);
  EXPECT_TRUE(s) << s.error().message;
  auto p = plan::compile(*s);
  EXPECT_TRUE(p) << p.error().message;
  lab::LabState st;
  st.lab = p->lab;
  st.topo = p->topo;
  st.phase = "up";
  return st;
}

scenario::Fault fault(const std::string& kind) {
  scenario::Fault f;
  f.kind = scenario::parse_fault_kind(kind).value();
  return f;
}

constexpr int64_t kMs = 1'000'000;

TEST(FaultKind, OneTableNamesEveryKind) {
  for (const auto& k : scenario::fault_kinds()) {
    EXPECT_EQ(scenario::parse_fault_kind(k.name), k.kind);
    EXPECT_EQ(scenario::name(k.kind), k.name);
  }
  EXPECT_FALSE(scenario::parse_fault_kind("link_down"));
  EXPECT_EQ(
      scenario::fault_kind_names(scenario::FaultTarget::kLink),
      (std::vector<std::string>{"link-down", "link-up", "flap", "loss", "blackhole", "latency"}));
  EXPECT_EQ(scenario::fault_kind_names(scenario::FaultTarget::kNode),
            (std::vector<std::string>{"node-crash", "rank-kill", "pfc-storm"}));
  EXPECT_EQ(scenario::info(scenario::FaultKind::kPfcStorm).verb_name, "pfc-storm");
  EXPECT_EQ(scenario::info(scenario::FaultKind::kRankKill).verb_name, "kill");
}

TEST(Fault, ResolvesEachKindAgainstTheTopology) {
  const auto st = lab_of("hz-bj.toml");
  auto f = fault("blackhole");
  f.a = "hz/tr";
  f.b = "bj/tr";
  f.link = "ec";
  auto r = fault::resolve(st, f);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->links.size(), 1u);
  EXPECT_EQ(st.topo.links[r->links[0]].wan, "ec");

  auto p = fault("partition");
  p.region_a = "hz";
  p.region_b = "bj";
  r = fault::resolve(st, p);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->links.size(), 2u);  // ec and vpn

  auto c = fault("node-crash");
  c.node = "hz/tor0a";
  r = fault::resolve(st, c);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->links.size(), 4u + 2u);  // one GPU per server on rail 0, two spines

  auto k = fault("rank-kill");
  k.node = "hz/s1/g2";
  r = fault::resolve(st, k);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->netns, "tb-hzbj-hz-s1-g2");

  k.node = "hz/tor0a";
  EXPECT_FALSE(fault::resolve(st, k));  // not a GPU
  c.node = "hz/s0/g0";
  EXPECT_FALSE(fault::resolve(st, c));  // a GPU
  auto bad = fault("link-down");
  bad.a = "hz/s0/g0";
  bad.b = "bj/s0/g0";
  auto e = fault::resolve(st, bad);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().exit_code, kExitBadInput);
}

// hz-bj as host `here` of a lab over several sees it: hz on host a, bj on host b, and hz's
// servers 2 and 3 (with their GPUs) on host c when `three`.
lab::LabState on_hosts(const std::string& here, bool three = false) {
  auto st = lab_of("hz-bj.toml");
  for (auto& n : st.topo.nodes) {
    n.host = n.region == "hz" ? "a" : "b";
    if (three && n.region == "hz" && n.server >= 2) n.host = "c";
  }
  st.host = here;
  return st;
}

// On one host of a lab over several (issue 19), a fault acts on this host's part: a WAN tunnel's
// end here, the other end's host named; a link, node or partition wholly elsewhere is exit 2
// naming the host that has it.
TEST(Fault, OnOneHostOfSeveralActsOnItsEndsAndNamesTheOthers) {
  const auto st = on_hosts("a");
  auto wan = fault("latency");
  wan.a = "hz/tr";
  wan.b = "bj/tr";
  wan.link = "ec";
  auto r = fault::resolve(st, wan);
  ASSERT_TRUE(r) << r.error().message;
  const auto& l = st.topo.links[r->links.at(0)];
  const auto here = fault::ends_here(st, l);
  EXPECT_TRUE(here.a != here.b);
  EXPECT_EQ(here.far_host(), "b");
  ASSERT_EQ(r->elsewhere.size(), 1u);
  EXPECT_NE(r->elsewhere[0].find("bj/tr:ec is on host b (a VXLAN tunnel): this host acted on "
                                 "its own end; run the same command on host b"),
            std::string::npos)
      << r->elsewhere[0];
  // A link of bj's: host b's.
  auto rail = fault("link-down");
  rail.a = "bj/s0/g0";
  rail.b = "bj/tor0";
  auto e = fault::resolve(st, rail);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().exit_code, kExitBadInput);
  EXPECT_NE(e.error().message.find("is on host b, not on this one (host a)"), std::string::npos)
      << e.error().message;
  EXPECT_NE(e.error().message.find("run it on host b"), std::string::npos) << e.error().message;
  // Nodes of bj's: crash and kill are host b's.
  auto crash = fault("node-crash");
  crash.node = "bj/tr";
  e = fault::resolve(st, crash);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("node bj/tr is on host b"), std::string::npos)
      << e.error().message;
  auto kill = fault("rank-kill");
  kill.node = "bj/s1/g1";
  e = fault::resolve(st, kill);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("run it on host b"), std::string::npos) << e.error().message;
  // hz's router here: all its links, the two WAN tunnels' far ends said.
  crash.node = "hz/tr";
  r = fault::resolve(st, crash);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->elsewhere.size(), 2u);
  // Both WAN links between hz and bj have an end here; from host b the same.
  auto part = fault("partition");
  part.region_a = "hz";
  part.region_b = "bj";
  r = fault::resolve(st, part);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->links.size(), 2u);
  EXPECT_EQ(r->elsewhere.size(), 2u);
  EXPECT_TRUE(fault::resolve(on_hosts("b"), part));
  // Host c holds hz's servers 2 and 3: no WAN link, so a partition is a and b's to make.
  const auto c = on_hosts("c", true);
  e = fault::resolve(c, part);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("no WAN link between hz and bj has an end on this host (host "
                                   "c of lab hzbj); they are on host a: run it there"),
            std::string::npos)
      << e.error().message;
  // The same lab on one host: every end here, nothing said.
  r = fault::resolve(lab_of("hz-bj.toml"), wan);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->elsewhere.empty());
  EXPECT_TRUE(fault::ends_here(lab_of("hz-bj.toml"), l).both());
}

TEST(Fault, ScheduleExpandsFlapsAndReverts) {
  const auto st = lab_of("mini.toml");
  auto flap = fault("flap");
  flap.a = "dc/s0/g0";
  flap.b = "dc/tor0";
  flap.at = Duration{1000 * kMs};
  flap.period = Duration{400 * kMs};
  flap.count = 3;
  auto down = fault("link-down");
  down.a = "dc/s1/g0";
  down.b = "dc/tor0";
  down.at = Duration{1100 * kMs};
  down.duration = Duration{2000 * kMs};
  auto kill = fault("rank-kill");
  kill.node = "dc/s0/g1";
  kill.at = Duration{500 * kMs};
  kill.duration = Duration{100 * kMs};  // a kill has nothing to revert
  std::vector<fault::Resolved> faults;
  for (const auto& f : {flap, down, kill}) faults.push_back(*fault::resolve(st, f));
  const auto steps = fault::schedule(faults);
  ASSERT_EQ(steps.size(), 6u + 2u + 1u);
  EXPECT_EQ(steps[0].fault, 2u);  // the kill, at 0.5 s
  EXPECT_EQ(steps[1].at_ns, 1000 * kMs);
  EXPECT_EQ(steps[2].at_ns, 1100 * kMs);  // link-down inject between flap steps
  EXPECT_EQ(steps[3].at_ns, 1200 * kMs);
  EXPECT_FALSE(steps[3].inject);
  EXPECT_EQ(steps[3].cycle, 0);
  EXPECT_EQ(steps.back().at_ns, 3100 * kMs);
  for (size_t i = 1; i < steps.size(); ++i) EXPECT_LE(steps[i - 1].at_ns, steps[i].at_ns);
}

TEST(Fault, ProbesCrossTheFaultedPath) {
  const auto st = lab_of("hz-bj.toml");
  auto wan = fault("link-down");
  wan.a = "hz/tr";
  wan.b = "bj/tr";
  wan.link = "ec";
  auto rail = fault("blackhole");
  rail.a = "hz/s1/g2";
  rail.b = "hz/tor2a";
  auto part = fault("partition");
  part.region_a = "hz";
  part.region_b = "bj";
  std::vector<fault::Resolved> faults;
  for (const auto& f : {wan, rail, part}) faults.push_back(*fault::resolve(st, f));
  const auto pairs = experiment::probe_pairs(st, faults);
  ASSERT_EQ(pairs.size(), 2u);  // the WAN path serves both the link fault and the partition
  EXPECT_EQ(pairs[0].src, "hz/s0/g0");
  EXPECT_EQ(pairs[0].dst, "bj/s0/g0");
  EXPECT_EQ(pairs[0].faults, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(pairs[1].src, "hz/s1/g2");
  EXPECT_EQ(st.topo.node(pairs[1].dst)->index, 2);  // the same rail on another server
  EXPECT_NE(st.topo.node(pairs[1].dst)->server, 1);
}

TEST(Recovery, BreaksDownEachFault) {
  metrics::RecoveryInput in;
  // Iterations every 10 ms from 0 to 1 s, a 300 ms hole after the fault at 500 ms.
  for (int64_t t = 0; t < 1000; t += 10) {
    if (t > 500 && t < 800) continue;
    in.iterations.push_back({t * kMs, (t + 10) * kMs});
  }
  in.faults = {{0, "link-down", "l", 500 * kMs, 499 * kMs, 700 * kMs, 699 * kMs}};
  in.control = {{490 * kMs, "route_add", "x", ""},  // before: not this fault's
                {499 * kMs, "carrier_down", "ns", "rail"},
                {560 * kMs, "route_add", "ns", "10.0.0.0/8"},
                {700 * kMs, "route_add", "ns", "repair"}};
  in.outages = {{{100 * kMs, 120 * kMs}, {505 * kMs, 610 * kMs}}};
  in.probed = {true};
  in.run_end_ns = 1000 * kMs;
  const auto r = metrics::analyze(in);
  ASSERT_TRUE(r.baseline_iter_ms);
  EXPECT_DOUBLE_EQ(*r.baseline_iter_ms, 10);
  ASSERT_EQ(r.faults.size(), 1u);
  const auto& f = r.faults[0];
  EXPECT_DOUBLE_EQ(*f.detection_ms, 0);  // carrier went down as it was injected
  EXPECT_EQ(f.detected_by, "carrier_down ns rail");
  EXPECT_DOUBLE_EQ(*f.reroute_ms, 60);
  EXPECT_DOUBLE_EQ(*f.outage_ms, 105);
  EXPECT_EQ(f.outage_end_ns, 610 * kMs);  // the report marks recovery there
  EXPECT_TRUE(f.recovered_before_repair);
  EXPECT_DOUBLE_EQ(*f.stall_ms, 300 - 10);  // 510 -> 810, less one iteration
  EXPECT_DOUBLE_EQ(r.max_stall_ms(), 290);

  // The fabric agent's host route on the spines is a reroute too.
  in.control.insert(in.control.begin() + 2, {501 * kMs, "fabric_withdraw", "hz", "hz/s0/g0"});
  EXPECT_DOUBLE_EQ(*metrics::analyze(in).faults[0].reroute_ms, 1);
}

// pfc-storm (design-congestion.md §6): the ToR port(s) facing a GPU on a lossless rail.
TEST(Fault, PfcStormTakesAGpuOnALosslessRailAndHoldsEachTorPortFacingIt) {
  const auto st = lab_of("hz-bj.toml");  // dual-ToR hpn rails: lossless by default
  auto f = fault("pfc-storm");
  f.node = "hz/s1/g0";
  auto r = fault::resolve(st, f);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->ports, (std::vector<std::string>{"hz/tor0a:s1g0", "hz/tor0b:s1g0"}));
  EXPECT_EQ(r->links.size(), 2u);
  EXPECT_EQ(r->label, "pfc-storm hz/s1/g0 (hz/tor0a:s1g0, hz/tor0b:s1g0)");

  f.node = "hz/tor0a";
  r = fault::resolve(st, f);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().exit_code, 2);
  EXPECT_NE(r.error().message.find("pfc-storm: hz/tor0a is a tor, not a GPU"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("GPUs with a lossless rail: hz/s0/g0"), std::string::npos)
      << r.error().message;

  // The same lab with drop-tail rails: refused, and nothing is valid.
  auto text = std::string(R"(
[lab]
name = "dt"
[profiles.r]
preset = "hpn"
congestion = "droptail"
[[region]]
name = "dc"
servers = 2
gpus_per_server = 1
rails = 1
scale_up = "nvlink"
rail = "r"
spines = 0
frontend = "vpc"
)");
  auto s = scenario::load_text(text, "dt.toml");
  ASSERT_TRUE(s) << s.error().message;
  auto p = plan::compile(*s);
  ASSERT_TRUE(p) << p.error().message;
  lab::LabState dt;
  dt.lab = p->lab;
  dt.topo = p->topo;
  dt.phase = "up";
  f.node = "dc/s0/g0";
  r = fault::resolve(dt, f);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().exit_code, 2);
  EXPECT_NE(r.error().message.find("pfc-storm: the rail of dc/s0/g0 is not lossless (congestion = "
                                   "\"droptail\")"),
            std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("lab dt has no GPU with a lossless rail"), std::string::npos)
      << r.error().message;
}

TEST(Recovery, APfcStormIsDetectedByTheWatchdogOnly) {
  metrics::RecoveryInput in;
  in.faults = {
      {0, "pfc-storm", "pfc-storm dc/s0/g0", 500 * kMs, 499 * kMs, 1500 * kMs, 1499 * kMs}};
  in.control = {{520 * kMs, "route_add", "ns", "unrelated"},
                {701 * kMs, "pfcwd_detect", "dc/tor0:s0g0", "paused 201 ms"}};
  in.run_end_ns = 2000 * kMs;
  auto r = metrics::analyze(in);
  ASSERT_TRUE(r.faults[0].detection_ms);
  EXPECT_DOUBLE_EQ(*r.faults[0].detection_ms, 201);
  EXPECT_EQ(r.faults[0].detected_by, "pfcwd_detect dc/tor0:s0g0 paused 201 ms");
  // Another kind takes the first control event, the watchdog's too.
  in.faults[0].kind = "link-down";
  in.control.erase(in.control.begin());
  r = metrics::analyze(in);
  ASSERT_TRUE(r.faults[0].detection_ms);
  EXPECT_EQ(r.faults[0].detected_by, "pfcwd_detect dc/tor0:s0g0 paused 201 ms");
  // No watchdog event (a storm on an idle port): not detected.
  in.faults[0].kind = "pfc-storm";
  in.control = {{520 * kMs, "route_add", "ns", "unrelated"}};
  EXPECT_FALSE(metrics::analyze(in).faults[0].detection_ms);
}

TEST(Recovery, NothingReactsToAStaticRouteBlackhole) {
  metrics::RecoveryInput in;
  for (int64_t t = 0; t < 400; t += 10) in.iterations.push_back({t * kMs, (t + 10) * kMs});
  in.faults = {{0, "blackhole", "wan", 200 * kMs, 200 * kMs, 0, 0}};
  in.outages = {{{201 * kMs, 1000 * kMs}}};
  in.run_end_ns = 1000 * kMs;
  // The workload never completes another iteration: the stall runs to the end.
  in.iterations.resize(20);
  const auto r = metrics::analyze(in);
  EXPECT_FALSE(r.faults[0].detection_ms);
  EXPECT_FALSE(r.faults[0].recovered_before_repair);
  EXPECT_DOUBLE_EQ(*r.faults[0].stall_ms, 800 - 10);  // to the end of the run, less one iteration
  scenario::Expect e;
  e.max_stall_ms = 500;
  e.max_detection_ms = 200;
  const auto v = experiment::check_expectations(e, r, 0.5);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_FALSE(v[0].ok);
  EXPECT_NE(v[0].text.find("max_stall_ms <= 500"), std::string::npos) << v[0].text;
  EXPECT_FALSE(v[1].ok);  // nothing detected it
  e = {};
  e.min_busbw_fraction = 0.4;
  EXPECT_TRUE(experiment::check_expectations(e, r, 0.5)[0].ok);
}

}  // namespace
}  // namespace tb

namespace tb {
namespace {

TEST(Failover, ModesChangeTheWanRoutesAndAgentsWatchEveryPath) {
  auto base = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/hz-bj.toml");
  ASSERT_TRUE(base);
  auto wan_routes = [](const plan::Plan& p) {
    int n = 0;
    for (const auto& op : p.ops)
      if (const auto* r = std::get_if<plan::AddRoute>(&op))
        for (const auto& nh : r->nexthops) n += nh.ifname == "ec" || nh.ifname == "vpn";
    return n;
  };
  auto linkstate = plan::compile(*base);
  ASSERT_TRUE(linkstate);
  EXPECT_EQ(wan_routes(*linkstate), 4);  // both routers, both links
  EXPECT_TRUE(linkstate->agents().empty());

  auto none = *base;
  none.failover.mode = "none";
  auto pn = plan::compile(none);
  ASSERT_TRUE(pn);
  EXPECT_EQ(wan_routes(*pn), 2);  // the primary only

  auto agent = *base;
  agent.failover.mode = "agent";
  agent.failover.probe_interval = Duration{50'000'000};
  agent.failover.misses = 3;
  auto pa = plan::compile(agent);
  ASSERT_TRUE(pa);
  EXPECT_EQ(wan_routes(*pa), 4);
  ASSERT_EQ(pa->agents().size(), 2u);
  const auto a = pa->agents()[0];
  EXPECT_EQ(a.node, "hz/tr");
  EXPECT_EQ(a.interval_ns, 50'000'000);
  ASSERT_EQ(a.paths.size(), 2u);
  EXPECT_EQ(a.paths[0].name, "ec");
  EXPECT_LT(a.paths[0].metric, a.paths[1].metric);  // primary before backup
  EXPECT_NE(plan::to_text(*pa).find("agent hz/tr"), std::string::npos);
}

TEST(Failover, BfdModeMakesRoutersInsteadOfStaticWanRoutes) {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/hz-bj.toml");
  ASSERT_TRUE(s);
  s->failover.mode = "bfd";
  s->failover.bfd_interval = Duration{50'000'000};
  auto p = plan::compile(*s);
  ASSERT_TRUE(p) << p.error().message;
  for (const auto& op : p->ops)
    if (const auto* r = std::get_if<plan::AddRoute>(&op)) {
      for (const auto& nh : r->nexthops) EXPECT_NE(nh.ifname, "ec") << "static route over ec";
    }
  ASSERT_EQ(p->routers().size(), 2u);
  const auto hz = p->routers()[0];
  EXPECT_EQ(hz.node, "hz/tr");
  EXPECT_EQ(hz.asn, 65001u);
  ASSERT_EQ(hz.neighbors.size(), 2u);
  EXPECT_EQ(hz.neighbors[0].asn, 65002u);
  EXPECT_GT(hz.neighbors[0].local_pref, hz.neighbors[1].local_pref);  // ec over vpn
  const std::string bgpd = failover::frr_bgpd_conf(hz);
  EXPECT_NE(bgpd.find("router bgp 65001\n"), std::string::npos) << bgpd;
  EXPECT_NE(bgpd.find(" neighbor " + hz.neighbors[0].addr.to_string() + " bfd profile wan\n"),
            std::string::npos)
      << bgpd;
  EXPECT_NE(bgpd.find("  network " + hz.networks[0].to_string() + "\n"), std::string::npos);
  EXPECT_NE(bgpd.find("route-map pref-ec permit 10\n set local-preference 200"), std::string::npos);
  const std::string bfdd = failover::frr_bfdd_conf(hz);
  EXPECT_NE(bfdd.find("detect-multiplier 3\n  receive-interval 50\n  transmit-interval 50"),
            std::string::npos)
      << bfdd;
}

TEST(Failover, DualTorRegionsGetAFabricAgentThatKnowsEveryGpuPort) {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/hz-bj.toml");
  ASSERT_TRUE(s);
  auto p = plan::compile(*s);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->fabric().size(), 1u);  // hz is dual-ToR with spines; bj has one ToR per rail
  const auto f = p->fabric()[0];
  auto rail_of = [&](const std::string& node) {
    for (const auto& [role, a] : p->topo.node(node)->addrs)
      if (role == "rail") return a.addr;
    return Ipv4{0};
  };
  EXPECT_EQ(f.region, "hz");
  EXPECT_EQ(f.spine_nodes, (std::vector<std::string>{"hz/spine0", "hz/spine1"}));
  EXPECT_EQ(f.netns, f.spine_netns[0]);
  ASSERT_EQ(f.tors.size(), 8u);
  ASSERT_EQ(f.gpus.size(), 16u);
  // hz/s0/g0 sits on rail 0: ports s0g0 on tor0a and tor0b, which the spines reach by t0a/t0b
  // at the ToRs' rail addresses (what the topology says they are).
  const auto& g = f.gpus[0];
  EXPECT_EQ(g.node, "hz/s0/g0");
  EXPECT_EQ(g.addr, rail_of("hz/s0/g0"));
  ASSERT_EQ(g.ports.size(), 2u);
  for (int side = 0; side < 2; ++side) {
    const auto& tor = f.tors.at(g.ports[side].tor);
    EXPECT_EQ(tor.node, side == 0 ? "hz/tor0a" : "hz/tor0b");
    EXPECT_EQ(tor.spine_port, side == 0 ? "t0a" : "t0b");
    EXPECT_EQ(g.ports[side].port, "s0g0");
    EXPECT_EQ(tor.addr, rail_of(tor.node));
  }
  const auto& g13 = f.gpus[13];  // hz/s3/g1: rail 1
  EXPECT_EQ(g13.node, "hz/s3/g1");
  EXPECT_EQ(f.tors.at(g13.ports[1].tor).node, "hz/tor1b");
  EXPECT_EQ(g13.ports[1].port, "s3g1");
  EXPECT_NE(plan::to_text(*p).find("fabric hz netns"), std::string::npos);

  s->failover.host_routes = "static";
  auto st = plan::compile(*s);
  ASSERT_TRUE(st);
  EXPECT_TRUE(st->fabric().empty());
  auto mini = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/mini.toml");
  ASSERT_TRUE(mini);
  auto pm = plan::compile(*mini);
  ASSERT_TRUE(pm);
  EXPECT_TRUE(pm->fabric().empty());  // one ToR per rail: nothing to choose between
}

TEST(Failover, FabricNextHopsAreTheToRsThatStillDeliver) {
  const std::vector<failover::FabricConfig::Port> ports{{4, "s0g0"}, {5, "s0g0"}};
  EXPECT_TRUE(failover::fabric_next_hops(ports, {true, true}).empty());  // whole: ECMP route
  EXPECT_EQ(failover::fabric_next_hops(ports, {false, true}), std::vector<int>{5});
  EXPECT_EQ(failover::fabric_next_hops(ports, {true, false}), std::vector<int>{4});
  EXPECT_TRUE(
      failover::fabric_next_hops(ports, {false, false}).empty());  // cut off: nothing better
}

TEST(Failover, FabricConfigRoundTripsAndRefusesNonsense) {
  failover::FabricConfig c{"hz",
                           {"hz/spine0"},
                           {"tb-x-hz-spine0"},
                           {{"hz/tor0a", "tb-x-hz-tor0a", "t0a", *parse_ipv4("198.18.0.1")},
                            {"hz/tor0b", "tb-x-hz-tor0b", "t0b", *parse_ipv4("198.18.0.2")}},
                           {{"hz/s0/g0", *parse_ipv4("198.18.0.8"), {{0, "s0g0"}, {1, "s0g0"}}}}};
  auto back = failover::fabric_config_from_json(failover::to_json(c));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->tors.at(1).spine_port, "t0b");
  EXPECT_EQ(back->gpus.at(0).ports.at(1).tor, 1);
  EXPECT_EQ(back->spine_netns.at(0), "tb-x-hz-spine0");
  auto j = failover::to_json(c);
  j["gpus"][0]["ports"][1]["tor"] = 2;  // no such ToR
  EXPECT_FALSE(failover::fabric_config_from_json(j));
  j = failover::to_json(c);
  j["gpus"][0]["addr"] = "198.18.0";
  EXPECT_FALSE(failover::fabric_config_from_json(j));
  j = failover::to_json(c);
  j["spine_netns"] = nlohmann::json::array();
  EXPECT_FALSE(failover::fabric_config_from_json(j));
}

TEST(Failover, LoaderChecksTheTable) {
  auto load = [](const std::string& extra) {
    std::ifstream in(std::string(TB_SOURCE_DIR) + "/scenarios/mini.toml");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    return scenario::load_text(text + "\n" + extra, "t.toml");
  };
  auto ok = load("[failover]\nmode = \"agent\"\nprobe_interval = \"20ms\"\nmisses = 5\n");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->failover.mode, "agent");
  EXPECT_EQ(ok->failover.misses, 5);
  auto bad = load("[failover]\nmode = \"bgp\"\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("mode"), std::string::npos) << bad.error().message;
  auto bfd = load("[failover]\nmode = \"bfd\"\nbfd_interval = \"50ms\"\nbfd_multiplier = 4\n");
  ASSERT_TRUE(bfd) << bfd.error().message;
  EXPECT_EQ(bfd->failover.bfd_interval.ns, 50'000'000);
  EXPECT_FALSE(load("[failover]\nmode = \"bfd\"\nbfd_interval = \"5ms\"\n"));  // below FRR's 10
  EXPECT_FALSE(load("[failover]\nmode = \"agent\"\nbfd_multiplier = 3\n"));
  bad = load("[failover]\nmode = \"none\"\nmisses = 3\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("only for mode = \"agent\""), std::string::npos)
      << bad.error().message;
  EXPECT_EQ(ok->failover.host_routes, "withdraw");  // the default
  auto st = load("[failover]\nhost_routes = \"static\"\n");
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->failover.host_routes, "static");
  bad = load("[failover]\nhost_routes = \"bgp\"\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("host_routes"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("withdraw"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace tb
