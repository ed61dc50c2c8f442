// Congestion models in the plan (issue 32, plan/congestion.h): thresholds scaled and floored by
// the agent's reaction, each lossless switch port's feeders from the topology, the agents (one
// per host), the sysctls, the queues' limits, and the refusals of a lossless profile where no
// pause can work.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "multihost_text.h"
#include "plan/congestion.h"
#include "plan/plan.h"
#include "plan_ops.h"
#include "scenario/loader.h"
#include "scenario_text.h"
#include "shaping/backend.h"
#include "shaping/qdisc_plan.h"
#include "shaping/sizing.h"

namespace tb::plan {
namespace {

using scenario::testing_text::kBjWan;
using scenario::testing_text::kHead;
using scenario::testing_text::kTwoHosts;

// The VPC's preset default (ecn) written back to droptail, for tests of the lossless rails alone.
constexpr const char* kVpcDroptail =
    "[profiles.vpc]\npreset = \"vpc\"\ncongestion = \"droptail\"\n";

scenario::Scenario cong_load(const std::string& text) {
  auto s = scenario::load_text(text, "x.toml");
  EXPECT_TRUE(s) << s.error().message;
  if (!s) return {};
  return std::move(*s);
}

Plan cong_plan(const scenario::Scenario& s, const std::string& host = "",
               const std::string& shaping = "auto") {
  auto p = compile(s, assumed_host("test host"), PlanOptions{"", shaping, "none", host});
  EXPECT_TRUE(p) << p.error().message;
  if (!p) return {};
  return std::move(*p);
}

const Link& link_of(const Topology& t, const std::string& node, const std::string& ifname) {
  for (const auto& l : t.links)
    if ((l.a.node == node && l.a.ifname == ifname) || (l.b.node == node && l.b.ifname == ifname))
      return l;
  ADD_FAILURE() << "no link at " << node << ":" << ifname;
  static Link none;
  return none;
}

// The figures of the egress at node:ifname.
const Link& link_of(const Plan& p, const std::string& node, const std::string& ifname) {
  return link_of(p.topo, node, ifname);
}

const shaping::Congestion& egress(const Topology& t, const std::string& node,
                                  const std::string& ifname) {
  const Link& l = link_of(t, node, ifname);
  return l.a.node == node && l.a.ifname == ifname ? l.emulated.congestion.ab
                                                  : l.emulated.congestion.ba;
}

const CongestionPort* port_named(const CongestionAgent& a, const std::string& name) {
  for (const auto& p : a.ports)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> feeder_names(const CongestionAgent& a, const CongestionPort& p) {
  std::vector<std::string> out;
  for (int i : p.feeders) {
    EXPECT_GE(i, 0);
    EXPECT_LT(i, static_cast<int>(a.upstreams.size()));
    if (i >= 0 && i < static_cast<int>(a.upstreams.size())) out.push_back(a.upstreams[i].name);
  }
  std::ranges::sort(out);
  return out;
}

bool has_note(const Link& l, const std::string& part) {
  for (const auto& n : l.emulated.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

const shaping::Congestion& egress(const Plan& p, const std::string& node,
                                  const std::string& ifname) {
  return egress(p.topo, node, ifname);
}

std::vector<CongestionAgent> agents_of(const Plan& p) {
  std::vector<CongestionAgent> out;
  for (const auto& d : p.all_daemons())
    if (const auto* c = std::get_if<CongestionAgent>(&d)) out.push_back(*c);
  return out;
}

// One rail, no spines (as mini): hpn at scale 1000 is 400 Mbit/s = 50 MB/s, frame 4214 B, TBF
// bucket 50 KB. A ToR GPU port has 3 feeders (the other GPUs' rail NICs):
//   xon  = 50 MB/s x (1 ms + 0.1 ms) = 55,000 (the scaled 160K = 164 B is below)
//   xoff = xon + max(2 x 4214, 2 x 50 KB, 3 x 50 KB buckets) = 205,000
//   headroom = 50 MB/s x (1 + 1 + 0.1 ms) + 4214 = 109,214 per feeder
//   limit = 205,000 + 3 x 109,214 + 2 x 50 MB/s x 10 ms = 1,532,642
TEST(CongestionPlan, FloorsWinAtScale1000) {
  auto s = cong_load(std::string(kHead) + "rails = 1\nspines = 0\n");
  Plan p = cong_plan(s);
  const auto& port = egress(p, "hz/tor0", "s0g0");
  EXPECT_EQ(port.model, "lossless");
  EXPECT_EQ(port.xon, 55'000u);
  EXPECT_EQ(port.xoff, 205'000u);
  EXPECT_EQ(port.feeders, 3);
  EXPECT_EQ(port.limit, 1'532'642u);
  const Link& rail = link_of(p, "hz/tor0", "s0g0");
  EXPECT_EQ(rail.emulated.congestion.xoff, 205u);  // 200K / 1000, before the floors
  EXPECT_TRUE(has_note(rail, "xoff 205 B (scaled from the profile) is below the 205 KB"));
  EXPECT_TRUE(has_note(rail, "xon 164 B (scaled from the profile) is below the 55 KB"));
  // The GPU's NIC queue: host memory, 16 MiB.
  const auto& nic = egress(p, "hz/s0/g0", "rail");
  EXPECT_EQ(nic.model, "lossless");
  EXPECT_EQ(nic.feeders, 0);
  EXPECT_EQ(nic.limit, kHostQueueLimit);
  // The shapes carry them: the ToR's TBF limit is the port's, the NIC's 16 MiB.
  bool tor = false, gpu = false;
  for (const auto& sh : ops_of<SetShape>(p)) {
    if (sh.ifname == "s0g0") {
      tor = true;
      EXPECT_EQ(shaping::limit_bytes(sh.shape), 1'532'642u);
      EXPECT_EQ(to_text(Op{sh}),
                "shape  tb-t-hz-tor0:s0g0  tbf rate 400Mbit mtu 4200 congestion lossless xoff "
                "205K xon 55K limit 1.53M (3 feeders)");
    }
    if (sh.netns == "tb-t-hz-s0-g0" && sh.ifname == "rail") {
      gpu = true;
      EXPECT_EQ(shaping::limit_bytes(sh.shape), kHostQueueLimit);
    }
  }
  EXPECT_TRUE(tor && gpu);
  // Scale-up stays as it was; the frontend (vpc) marks ECN (CongestionPlan.EcnOnTheVpc).
  EXPECT_TRUE(egress(p, "hz/s0/g0", "nvl").empty());
  EXPECT_EQ(egress(p, "hz/vpc", "s0").model, "ecn");
}

// vpc at scale 1000: 25 Mbit/s, MTU 1500 (frame F = 1514 B). DCQCN's Kmin 5K and Kmax 200K scale
// to 5 B and 205 B, below what marking can tell apart: kmin = 2F, kmax = kmin + 2F, pmax 1%.
// Every VPC egress toward a routed port marks (the servers' s*, the TR's tr), each with its own
// slot in the host's mark table; the stage queue just downstream of it (at the receiving port's
// PREROUTING) marks with that slot; the agent polls those ports and publishes there; every GPU
// and server of the region negotiates ECN.
TEST(CongestionPlan, EcnOnTheVpc) {
  Plan p = cong_plan(cong_load(kHead));
  const uint64_t F = shaping::frame_bytes(1500);
  const auto& port = egress(p, "hz/vpc", "s0");
  EXPECT_EQ(port.model, "ecn");
  EXPECT_EQ(port.kmin, 2 * F);
  EXPECT_EQ(port.kmax, 4 * F);
  EXPECT_DOUBLE_EQ(port.pmax, 0.01);
  EXPECT_EQ(port.feeders, 0);
  const Link& fe = link_of(p, "hz/vpc", "s0");
  EXPECT_EQ(fe.emulated.congestion.model, "ecn");
  EXPECT_EQ(fe.emulated.congestion.kmin, 5u);  // 5K / 1000, before the floors
  EXPECT_TRUE(has_note(fe, "kmin 5 B (scaled from the profile) is below two frames"));
  // The server's own NIC queue and the TR's port toward the VPC do not mark (no switch).
  EXPECT_TRUE(egress(p, "hz/s0", "fe").empty());
  std::set<int> slots;
  for (const char* ifname : {"s0", "s1", "tr"}) {
    const auto& e = egress(p, "hz/vpc", ifname);
    EXPECT_EQ(e.model, "ecn") << ifname;
    EXPECT_GE(e.mark_slot, 0) << ifname;
    slots.insert(e.mark_slot);
  }
  EXPECT_EQ(slots.size(), 3u);
  // The plan line of the VPC port's shape.
  bool shown = false;
  for (const auto& sh : ops_of<SetShape>(p))
    if (sh.netns == "tb-t-hz-vpc" && sh.ifname == "s0") {
      shown = true;
      EXPECT_HAS(to_text(Op{sh}),
                 fmt::format("congestion ecn kmin 3.03K kmax 6.06K pmax 1% limit 68.7K (mark "
                             "slot {})",
                             port.mark_slot));
    }
  EXPECT_TRUE(shown);
  // The server's stage marks what leaves hz/vpc:s0 with that slot, reading the lab's table.
  bool staged = false;
  for (const auto& d : p.all_daemons())
    if (const auto* st = std::get_if<Stage>(&d); st && st->node == "hz/s0") {
      EXPECT_EQ(st->mark_table, "/dev/shm/testbedctl.t.congestion");
      for (const auto& q : st->queues)
        if (q.link == "hz/vpc:s0 -> hz/s0:fe") {
          staged = true;
          EXPECT_EQ(q.mark, port.mark_slot);
        }
      const Stage back = stage_from_json(to_json(*st));
      EXPECT_EQ(back.mark_table, st->mark_table);
      ASSERT_EQ(back.queues.size(), st->queues.size());
      for (size_t i = 0; i < back.queues.size(); ++i)
        EXPECT_EQ(back.queues[i].mark, st->queues[i].mark);
    }
  EXPECT_TRUE(staged);
  // The agent polls the ecn ports and publishes into the table.
  const auto agents = agents_of(p);
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents[0].mark_table, "/dev/shm/testbedctl.t.congestion");
  const auto* cp = port_named(agents[0], "hz/vpc:s0");
  ASSERT_NE(cp, nullptr);
  EXPECT_EQ(cp->model, "ecn");
  EXPECT_EQ(cp->mark_slot, port.mark_slot);
  EXPECT_EQ(cp->kmin, 2 * F);
  EXPECT_TRUE(cp->feeders.empty());
  const CongestionAgent back = congestion_from_json(to_json(agents[0]));
  EXPECT_EQ(back.mark_table, agents[0].mark_table);
  EXPECT_EQ(port_named(back, "hz/vpc:s0")->mark_slot, port.mark_slot);
  // ECN negotiated by every GPU and server.
  std::set<std::string> ecn;
  for (const auto& sc : ops_of<SetSysctl>(p))
    if (sc.key == "net/ipv4/tcp_ecn") {
      EXPECT_EQ(sc.value, "1");
      ecn.insert(sc.netns);
    }
  EXPECT_EQ(ecn, (std::set<std::string>{"tb-t-hz-s0", "tb-t-hz-s1", "tb-t-hz-s0-g0",
                                        "tb-t-hz-s0-g1", "tb-t-hz-s1-g0", "tb-t-hz-s1-g1"}));
  // Round trip of the figures.
  const Topology t = topology_from_json(to_json(p.topo));
  EXPECT_EQ(egress(t, "hz/vpc", "s0"), port);
  // droptail on the VPC: no marking, no tcp_ecn.
  Plan d = cong_plan(cong_load(std::string(kHead) +
                               "[profiles.vpc]\npreset = \"vpc\"\ncongestion = \"droptail\"\n"));
  EXPECT_TRUE(egress(d, "hz/vpc", "s0").empty());
  for (const auto& sc : ops_of<SetSysctl>(d)) EXPECT_NE(sc.key, "net/ipv4/tcp_ecn");
}

// The TCP an ecn region's servers and GPUs use toward the VPC reacts to CE: their default
// routes carry congctl kEcnCongctl, and each server's VPC address comes without the kernel's
// subnet route (IFA_F_NOPREFIXROUTE), the plan adding that route itself with the congctl
// (server to server the VPC is that subnet), before the server's default route. The rails keep
// the namespace's default; a droptail VPC leaves addresses and routes as the kernel makes them.
TEST(CongestionPlan, EcnRegionsVpcRoutesNameACeAwareCongctl) {
  Plan p = cong_plan(cong_load(kHead));
  std::set<std::string> no_prefix_route;
  Prefix fe0{};
  for (const auto& a : ops_of<AddAddr>(p))
    if (a.noprefixroute) {
      EXPECT_EQ(a.ifname, "fe") << a.netns;
      no_prefix_route.insert(a.netns);
      if (a.netns == "tb-t-hz-s0") fe0 = a.addr;
    }
  EXPECT_EQ(no_prefix_route, (std::set<std::string>{"tb-t-hz-s0", "tb-t-hz-s1"}));
  ASSERT_GT(fe0.len, 0);
  int subnet_at = -1, default_at = -1;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const auto* r = std::get_if<AddRoute>(&p.ops[i]);
    if (!r) continue;
    if (r->netns == "tb-t-hz-s0" && r->dst == fe0.network()) {
      EXPECT_EQ(subnet_at, -1) << "two routes for the VPC subnet";
      subnet_at = static_cast<int>(i);
      ASSERT_EQ(r->nexthops.size(), 1u);
      EXPECT_EQ(r->nexthops[0].ifname, "fe");
      EXPECT_FALSE(r->nexthops[0].via.has_value());  // a device route: scope link
      ASSERT_TRUE(r->src.has_value());
      EXPECT_EQ(*r->src, fe0.addr);
      EXPECT_EQ(r->metric, 0);
      EXPECT_EQ(r->congctl, kEcnCongctl);
      EXPECT_EQ(to_text(p.ops[i]),
                fmt::format("route  tb-t-hz-s0  {} dev fe  src {}  congctl {}",
                            fe0.network().to_string(), fe0.addr.to_string(), kEcnCongctl));
      auto back = op_from_json(to_json(p.ops[i]));
      ASSERT_TRUE(back);
      EXPECT_EQ(std::get<AddRoute>(*back).congctl, kEcnCongctl);
    }
    if (r->dst.len == 0 && r->netns == "tb-t-hz-s0") default_at = static_cast<int>(i);
    // Toward the VPC: cubic; the rails (GPUs' rail block routes): the namespace's default.
    if (r->dst.len == 0 && r->netns.starts_with("tb-t-hz-s")) {
      EXPECT_EQ(r->congctl, kEcnCongctl) << to_text(p.ops[i]);
    }
    if (r->nexthops.front().ifname.starts_with("rail")) {
      EXPECT_EQ(r->congctl, "") << r->netns;
    }
  }
  ASSERT_GE(subnet_at, 0) << "no route for the VPC subnet in hz/s0";
  EXPECT_LT(subnet_at, default_at);
  // The address's plan line and journal form say so.
  for (const auto& op : p.ops)
    if (const auto* a = std::get_if<AddAddr>(&op);
        a && a->netns == "tb-t-hz-s0" && a->ifname == "fe") {
      EXPECT_EQ(to_text(op), "addr   tb-t-hz-s0:fe  " + fe0.to_string() + "  noprefixroute");
      auto back = op_from_json(to_json(op));
      ASSERT_TRUE(back);
      EXPECT_TRUE(std::get<AddAddr>(*back).noprefixroute);
      EXPECT_FALSE(
          std::get<AddAddr>(*op_from_json(to_json(Op{AddAddr{"n", "fe", fe0}}))).noprefixroute);
    }
  // droptail on the VPC: no flag, no congctl, no route of the plan's own for the subnet.
  Plan d = cong_plan(cong_load(std::string(kHead) + kVpcDroptail));
  for (const auto& a : ops_of<AddAddr>(d)) EXPECT_FALSE(a.noprefixroute) << a.netns;
  for (const auto& r : ops_of<AddRoute>(d)) {
    EXPECT_EQ(r.congctl, "") << r.netns;
    EXPECT_FALSE(r.netns == "tb-t-hz-s0" && r.dst == fe0.network());
  }
  EXPECT_EQ(ops_of<AddRoute>(d).size() + 2, ops_of<AddRoute>(p).size());
}

// ecn where no marking can work: an error where the profile writes it, droptail with a note
// where it is the preset's default (vpc at scale 1 runs at host speed).
TEST(CongestionPlan, EcnWhereMarkingCannotWork) {
  Plan p = cong_plan(cong_load(std::string(kHead) + "[scale]\nbandwidth = 1\n"));
  EXPECT_EQ(link_of(p, "hz/vpc", "s0").emulated.congestion.model, "droptail");
  EXPECT_TRUE(has_note(link_of(p, "hz/vpc", "s0"), "ecn (the vpc profile's default) not emulated"));
  auto e = compile(cong_load(std::string(kHead) + "[scale]\nbandwidth = 1\n" +
                             "[profiles.vpc]\npreset = \"vpc\"\ncongestion = \"ecn\"\n"),
                   assumed_host("test host"), PlanOptions{});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().exit_code, kExitBadInput);
  EXPECT_HAS(e.error().message, "congestion = \"ecn\" needs a rate limit on both directions");
}

// A thicker real threshold wins over the floor; the floor's note is then not written.
TEST(CongestionPlan, AScaledThresholdAboveTheFloorIsKept) {
  auto s = cong_load(std::string(kHead) + "rails = 1\nspines = 0\n[scale]\nbandwidth = 1\n" +
                     "[profiles.hpn]\nrate = \"400mbit\"\nmtu = 4200\ncongestion = \"lossless\"\n" +
                     "xoff = \"1M\"\nxon = \"512K\"\nbuffer = \"8M\"\n");
  Plan p = cong_plan(s);
  const auto& port = egress(p, "hz/tor0", "s0g0");
  EXPECT_EQ(port.xoff, 1u << 20);
  EXPECT_EQ(port.xon, 512u << 10);
  EXPECT_EQ(port.limit, 8u << 20);  // the buffer: more than xoff + headroom + onset
  EXPECT_FALSE(has_note(link_of(p, "hz/tor0", "s0g0"), "scaled from the profile"));
}

// Dual ToRs and two spines: ToR GPU port <- the other GPU ports of that ToR and its spines;
// ToR spine port <- the GPU ports; spine port <- the spine's other ports (ToR sp* queues, which
// are polled themselves: hop by hop).
TEST(CongestionPlan, FeedersFollowTheTopology) {
  // The rails only (the VPC droptail): its ecn ports are EcnOnTheVpc's.
  auto s = cong_load(std::string(kHead) + "dual_tor = true\nspines = 2\n" + kVpcDroptail);
  Plan p = cong_plan(s);
  const auto got = agents_of(p);
  ASSERT_EQ(got.size(), 1u);
  const CongestionAgent& a = got[0];
  EXPECT_EQ(a.netns, "tb-t-hz-tor0a");  // the first polled switch (links in plan order)
  const auto* gpu_port = port_named(a, "hz/tor0a:s0g0");
  ASSERT_NE(gpu_port, nullptr);
  EXPECT_EQ(feeder_names(a, *gpu_port),
            (std::vector<std::string>{"hz/s1/g0:raila", "hz/spine0:t0a", "hz/spine1:t0a"}));
  const auto* up_port = port_named(a, "hz/tor0a:sp1");
  ASSERT_NE(up_port, nullptr);
  EXPECT_EQ(feeder_names(a, *up_port),
            (std::vector<std::string>{"hz/s0/g0:raila", "hz/s1/g0:raila"}));
  const auto* spine_port = port_named(a, "hz/spine0:t0a");
  ASSERT_NE(spine_port, nullptr);
  EXPECT_EQ(feeder_names(a, *spine_port),
            (std::vector<std::string>{"hz/tor0b:sp0", "hz/tor1a:sp0", "hz/tor1b:sp0"}));
  EXPECT_EQ(egress(p, "hz/spine0", "t0a").feeders, 3);
  // Hop by hop: an upstream that is a polled port points at it; a NIC does not.
  for (const auto& u : a.upstreams) {
    const auto* self = port_named(a, u.name);
    if (self) {
      ASSERT_GE(u.port, 0) << u.name;
      EXPECT_EQ(a.ports[u.port].name, u.name);
    } else
      EXPECT_EQ(u.port, -1) << u.name;
  }
  // Each polled port carries its own TBF as shaped (a pfc-storm holds it, P8).
  for (const auto& port : a.ports) {
    EXPECT_EQ(port.rate, 50'000'000u) << port.name;
    EXPECT_EQ(port.burst, 50'000u) << port.name;
    EXPECT_GE(port.limit, port.xoff) << port.name;
    EXPECT_EQ(port.mtu, 4200u) << port.name;
  }
  // Each upstream's TBF as shaped: 400 Mbit/s, its 50 KB bucket, a pause quantum of 84 ms.
  for (const auto& u : a.upstreams) {
    EXPECT_EQ(u.rate, 50'000'000u) << u.name;
    EXPECT_EQ(u.burst, 50'000u) << u.name;
    EXPECT_EQ(u.handle, 0x10000u) << u.name;
    EXPECT_EQ(u.parent, 0xffffffffu) << u.name;
    EXPECT_EQ(u.mtu, 4200u);
    EXPECT_EQ(u.quantum_ns, 83'884'800);
  }
  const auto* nic = [&]() -> const CongestionUpstream* {
    for (const auto& u : a.upstreams)
      if (u.name == "hz/s0/g0:raila") return &u;
    return nullptr;
  }();
  ASSERT_NE(nic, nullptr);
  EXPECT_EQ(nic->limit, kHostQueueLimit);
  EXPECT_EQ(nic->feeds_ifname, "s0g0");
  EXPECT_EQ(a.poll_ns, 1'000'000);
  EXPECT_EQ(a.action, "drop");
}

// A lab over two hosts: one agent each, in its own switch's namespace, its upstream indices
// into its own list; `--host` keeps that host's agent only. The WAN between them is droptail.
TEST(CongestionPlan, OneAgentPerHost) {
  auto s = cong_load(std::string(kHead) + kBjWan + kTwoHosts + kVpcDroptail);
  Plan p = cong_plan(s);
  const auto got = agents_of(p);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].netns, "tb-t-hz-tor0");
  EXPECT_EQ(got[1].netns, "tb-t-bj-tor0");
  for (const auto& a : got) {
    const std::string region = a.netns == "tb-t-hz-tor0" ? "hz/" : "bj/";
    for (const auto& port : a.ports) {
      EXPECT_EQ(port.name.rfind(region, 0), 0u) << port.name;
      for (int i : port.feeders) {
        ASSERT_LT(i, static_cast<int>(a.upstreams.size()));
        EXPECT_EQ(a.upstreams[i].name.rfind(region, 0), 0u) << a.upstreams[i].name;
      }
    }
  }
  Plan b = cong_plan(s, "b");
  const auto only = agents_of(b);
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(to_json(only[0]), to_json(got[1]));
}

// tcp_slow_start_after_idle = 0 in every GPU namespace whose rail is lossless, and nowhere
// else; a lab whose profiles are all droptail has no agent and no such sysctl.
TEST(CongestionPlan, SysctlsAndNoAgentWhenDroptail) {
  Plan p = cong_plan(cong_load(kHead));
  std::set<std::string> ns;
  for (const auto& sc : ops_of<SetSysctl>(p))
    if (sc.key == "net/ipv4/tcp_slow_start_after_idle") {
      EXPECT_EQ(sc.value, "0");
      ns.insert(sc.netns);
    }
  EXPECT_EQ(ns, (std::set<std::string>{"tb-t-hz-s0-g0", "tb-t-hz-s0-g1", "tb-t-hz-s1-g0",
                                       "tb-t-hz-s1-g1"}));
  Plan d = cong_plan(cong_load(std::string(kHead) +
                               "[profiles.hpn]\npreset = \"hpn\"\ncongestion = \"droptail\"\n"
                               "[profiles.vpc]\npreset = \"vpc\"\ncongestion = \"droptail\"\n"));
  for (const auto& sc : ops_of<SetSysctl>(d))
    EXPECT_NE(sc.key, "net/ipv4/tcp_slow_start_after_idle");
  for (const auto& dm : d.all_daemons()) EXPECT_FALSE(std::holds_alternative<CongestionAgent>(dm));
  for (const auto& sh : ops_of<SetShape>(d)) EXPECT_TRUE(sh.shape.congestion.empty());
  // No TBF to pause (htb): no agent, and the plan says why.
  Plan h = cong_plan(cong_load(kHead), "", "htb");
  for (const auto& dm : h.all_daemons()) EXPECT_FALSE(std::holds_alternative<CongestionAgent>(dm));
  EXPECT_TRUE(
      has_note(link_of(h, "hz/tor0", "s0g0"), "lossless not enforced: shaping backend htb"));
}

// A profile that writes congestion = "lossless" where no pause can work is bad input at its
// `congestion`; hpn's default there stays droptail with a note.
TEST(CongestionPlan, LosslessWherePausesCannotWork) {
  // Host speed: 400 Gbit/s at scale 1 is beyond a veth.
  auto fast = cong_load(std::string(kHead) + "[scale]\nbandwidth = 1\n");
  Plan p = cong_plan(fast);
  EXPECT_TRUE(egress(p, "hz/tor0", "s0g0").empty());
  EXPECT_EQ(link_of(p, "hz/tor0", "s0g0").emulated.congestion.model, "droptail");
  EXPECT_TRUE(
      has_note(link_of(p, "hz/tor0", "s0g0"), "lossless (the hpn profile's default) not emulated"));
  for (const auto& dm : p.all_daemons()) EXPECT_FALSE(std::holds_alternative<CongestionAgent>(dm));
  auto written = cong_load(std::string(kHead) + "[scale]\nbandwidth = 1\n" +
                           "[profiles.hpn]\npreset = \"hpn\"\ncongestion = \"lossless\"\n");
  auto e = compile(written, assumed_host("test host"), PlanOptions{});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().exit_code, kExitBadInput);
  EXPECT_HAS(e.error().message, "x.toml:15:14: [profiles.hpn] link hz/tor0:sp0 <-> hz/spine0:t0: ");
  EXPECT_HAS(e.error().message,
             "congestion = \"lossless\" needs a rate limit on both directions; this link runs at "
             "host speed");
  // Across hosts: hz/s1 on host b, its rail links are tunnels.
  const std::string apart = std::string(kHead) + kBjWan + kTwoHosts + "servers = [\"hz/s1\"]\n";
  Plan t = cong_plan(cong_load(apart));
  EXPECT_EQ(link_of(t, "hz/s1/g0", "rail").emulated.congestion.model, "droptail");
  EXPECT_TRUE(has_note(link_of(t, "hz/s1/g0", "rail"), "no pause crosses a VXLAN tunnel"));
  EXPECT_EQ(link_of(t, "hz/s0/g0", "rail").emulated.congestion.model, "lossless");
  auto tw = compile(cong_load(apart + "[profiles.hpn]\npreset = \"hpn\"\ncongestion = "
                                      "\"lossless\"\n"),
                    assumed_host("test host"), PlanOptions{});
  ASSERT_FALSE(tw);
  EXPECT_HAS(tw.error().message, "congestion = \"lossless\" does not cross hosts");
}

// With netem the lever is the TBF child under netem's class (shaping/qdisc_plan.h): the agent
// reads and pauses that one.
TEST(CongestionPlan, NetemBackendPointsAtItsTbfChild) {
  HostCaps caps = assumed_host("test host");
  caps.netem = true;
  auto p = compile(cong_load(kHead), caps, PlanOptions{"", "netem", "none", ""});
  ASSERT_TRUE(p) << p.error().message;
  const auto agents = agents_of(*p);
  ASSERT_EQ(agents.size(), 1u);
  for (const auto& port : agents[0].ports) {
    EXPECT_EQ(port.handle, shaping::kNetemTbfChild) << port.name;
    EXPECT_EQ(port.parent, shaping::kNetemTbfClass) << port.name;
  }
  for (const auto& u : agents[0].upstreams) {
    EXPECT_EQ(u.handle, shaping::kNetemTbfChild) << u.name;
    EXPECT_EQ(u.parent, shaping::kNetemTbfClass) << u.name;
  }
}

// Where the host has sch_red, the VPC's ecn ports mark in the kernel: each carries a RED child of
// its TBF from kmin to kmax (shaping/backend.h add_red_child), no mark slot, no marking stage
// queue downstream, no mark table for the agent, which reads RED's own count; the topology's
// figures (and so the digest other hosts compare) are the same as without RED.
TEST(CongestionPlan, WithRedTheKernelMarksAndNoStageDoes) {
  HostCaps caps = assumed_host("test host");
  caps.red = true;
  for (const char* backend : {"tbf", "netem"}) {
    if (std::string(backend) == "netem") caps.netem = true;
    auto p = compile(cong_load(kHead), caps, PlanOptions{"", backend, "none", ""});
    ASSERT_TRUE(p) << p.error().message;
    const Plan without = cong_plan(cong_load(kHead));
    EXPECT_EQ(p->digest, without.digest) << backend;
    const auto& port = egress(*p, "hz/vpc", "s0");
    EXPECT_EQ(port.model, "ecn");
    EXPECT_TRUE(port.red);
    EXPECT_EQ(port.mark_slot, -1);
    bool shaped = false;
    for (const auto& sh : ops_of<SetShape>(*p))
      if (sh.netns == "tb-t-hz-vpc" && sh.ifname == "s0") {
        shaped = true;
        EXPECT_HAS(to_text(Op{sh}), "(RED marks)");
        auto qp = shaping::plan_qdiscs(sh.shape, backend);
        ASSERT_TRUE(qp) << qp.error().message;
        ASSERT_EQ(qp->nodes.back().kind(), "red") << backend;
        const auto& red = std::get<netlink::RedOptions>(qp->nodes.back().options);
        EXPECT_EQ(red.qth_min, port.kmin);
        EXPECT_EQ(red.qth_max, port.kmax);
        EXPECT_EQ(qp->nodes.back().parent, std::string(backend) == "tbf"
                                               ? shaping::kTbfClass
                                               : (shaping::kNetemTbfChild | 1));
      }
    EXPECT_TRUE(shaped) << backend;
    for (const auto& d : p->all_daemons())
      if (const auto* st = std::get_if<Stage>(&d)) {
        EXPECT_TRUE(st->mark_table.empty()) << st->node;
        for (const auto& q : st->queues) EXPECT_LT(q.mark, 0) << q.link;
      }
    const auto agents = agents_of(*p);
    ASSERT_EQ(agents.size(), 1u);
    EXPECT_TRUE(agents[0].mark_table.empty());
    const auto* cp = port_named(agents[0], "hz/vpc:s0");
    ASSERT_NE(cp, nullptr);
    EXPECT_TRUE(cp->red);
    EXPECT_TRUE(port_named(congestion_from_json(to_json(agents[0])), "hz/vpc:s0")->red);
    EXPECT_TRUE(egress(topology_from_json(to_json(p->topo)), "hz/vpc", "s0").red);
  }
}

// Where the host has dctcp, an ecn region's routes toward the VPC name it instead of cubic (the
// same routes, the same digest: the TCP is this host's, not the topology's).
TEST(CongestionPlan, WithDctcpTheVpcRoutesNameIt) {
  HostCaps caps = assumed_host("test host");
  caps.dctcp = true;
  auto p = compile(cong_load(kHead), caps, PlanOptions{"", "tbf", "none", ""});
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->digest, cong_plan(cong_load(kHead)).digest);
  int named = 0;
  for (const auto& op : p->ops)
    if (const auto* r = std::get_if<AddRoute>(&op); r && !r->congctl.empty()) {
      EXPECT_EQ(r->congctl, kEcnCongctlDctcp) << to_text(op);
      ++named;
    }
  EXPECT_GT(named, 0);
}

// The figures survive the lab's state (topology JSON) and the journal (SetShape JSON).
TEST(CongestionPlan, FiguresRoundTripThroughJson) {
  Plan p = cong_plan(cong_load(kHead));
  const Topology back = topology_from_json(to_json(p.topo));
  EXPECT_EQ(to_json(back), to_json(p.topo));
  const Link& l = link_of(back, "hz/tor0", "s0g0");
  EXPECT_EQ(l.emulated.congestion.model, "lossless");
  EXPECT_EQ(egress(p, "hz/tor0", "s0g0"), egress(back, "hz/tor0", "s0g0"));
  for (const auto& sh : ops_of<SetShape>(p)) {
    auto op = op_from_json(to_json(Op{sh}));
    ASSERT_TRUE(op);
    EXPECT_EQ(std::get<SetShape>(*op).shape, sh.shape);
  }
}

// Sizing: a lossless queue's own limit replaces the droptail one in every backend's queue.
TEST(CongestionPlan, ShapingUsesTheCongestionLimit) {
  shaping::LinkShape s{Rate{400e6}, Duration{0}, Duration{0}, 0, 4200, false, {}, {}};
  EXPECT_EQ(shaping::limit_bytes(s), 300'000u);  // 250 KB buffer + 50 KB bucket
  s.congestion = {"lossless", 205'000, 55'000, 1'532'642, 3};
  EXPECT_EQ(shaping::limit_bytes(s), 1'532'642u);
  for (const char* backend : {"tbf", "netem", "htb"}) {
    auto qp = shaping::plan_qdiscs(s, backend);
    ASSERT_TRUE(qp) << backend;
    bool found = false;
    for (const auto& n : qp->nodes) {
      if (const auto* t = std::get_if<netlink::TbfOptions>(&n.options)) {
        EXPECT_EQ(t->limit, 1'532'642u) << backend;
        found = true;
      }
      if (const auto* b = std::get_if<netlink::BfifoOptions>(&n.options)) {
        EXPECT_EQ(b->limit, 1'532'642u) << backend;
        found = true;
      }
    }
    EXPECT_TRUE(found) << backend;
  }
}

}  // namespace
}  // namespace tb::plan
