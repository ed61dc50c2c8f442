// The shipped scenarios load, and what they say ends up in the model.
#include <gtest/gtest.h>

#include "scenario/loader.h"
#include "scenario/names.h"
#include "scenario/presets.h"

namespace tb::scenario {
namespace {

Scenario load_ok(const std::string& path) {
  auto s = load(path);
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message);
  if (!s) return {};
  return std::move(*s);
}

TEST(ScenarioLoad, HzBjLoads) {
  Scenario s = load_ok(TB_SOURCE_DIR "/scenarios/hz-bj.toml");
  EXPECT_EQ(s.lab, "hzbj");
  EXPECT_EQ(s.address_space.to_string(), "198.18.0.0/15");
  EXPECT_EQ(s.scale.bandwidth, 1000);
  EXPECT_EQ(s.scale.delay, 1);
  ASSERT_EQ(s.regions.size(), 2u);

  const Region* hz = s.region("hz");
  ASSERT_NE(hz, nullptr);
  EXPECT_EQ(hz->description, "Hangzhou training cluster");
  EXPECT_EQ(hz->servers, 4);
  EXPECT_EQ(hz->gpus_per_server, 4);
  EXPECT_EQ(s.rails(*hz), 4);
  EXPECT_TRUE(hz->dual_tor);
  EXPECT_EQ(hz->spines, 2);
  EXPECT_EQ(hz->scale_up, "nvlink");
  EXPECT_EQ(s.profile(hz->rail).preset, "hpn");
  EXPECT_EQ(hz->frontend, "vpc");

  const Region* bj = s.region("bj");
  ASSERT_NE(bj, nullptr);
  EXPECT_EQ(bj->description, "Beijing inference cluster");
  EXPECT_EQ(bj->servers, 2);
  EXPECT_EQ(bj->gpus_per_server, 2);
  EXPECT_FALSE(bj->dual_tor);
  EXPECT_EQ(bj->spines, 1);
  EXPECT_EQ(bj->spine_link, bj->rail);  // default

  ASSERT_EQ(s.wans.size(), 2u);
  EXPECT_EQ(s.wans[0].name, "ec");
  EXPECT_EQ(s.wans[0].role, WanRole::kPrimary);
  EXPECT_EQ(s.wans[1].name, "vpn");
  EXPECT_EQ(s.wans[1].role, WanRole::kBackup);

  // Every referenced profile is resolved: declared ones and presets named directly.
  for (const auto& r : s.regions)
    for (const auto& p : {r.scale_up, r.rail, r.spine_link, r.frontend})
      EXPECT_TRUE(s.profiles.contains(p)) << p;
  for (const auto& w : s.wans) EXPECT_TRUE(s.profiles.contains(w.profile)) << w.profile;
  EXPECT_EQ(s.profile("express-connect").delay, parse_duration("25ms").value());
  EXPECT_EQ(s.profile("spine").delay, parse_duration("3us").value());
  EXPECT_EQ(s.profile("spine").mtu, 4200);  // from the preset

  ASSERT_EQ(s.workloads.size(), 2u);
  EXPECT_EQ(s.workloads[0].kind, "collective");
  EXPECT_EQ(s.workloads[0].op, "allreduce");
  EXPECT_EQ(s.workloads[0].ranks, "hz");
  EXPECT_EQ(s.workloads[0].min_bytes, 8u * 1024);
  EXPECT_EQ(s.workloads[0].max_bytes, 64u * 1024 * 1024);
  EXPECT_EQ(s.workloads[1].kind, "checkpoint");
  EXPECT_EQ(s.workloads[1].from, "hz");
  EXPECT_EQ(s.workloads[1].to, "bj");
  EXPECT_EQ(s.workloads[1].bytes, 1ull << 30);
  EXPECT_EQ(s.workloads[1].qos, "bronze");

  ASSERT_EQ(s.faults.size(), 2u);
  EXPECT_EQ(s.faults[0].kind, FaultKind::kLinkDown);
  EXPECT_EQ(s.faults[0].link, "ec");
  EXPECT_EQ(s.faults[0].at.ns, 10'000'000'000);
  EXPECT_EQ(s.faults[0].duration.ns, 3'000'000'000);
  EXPECT_EQ(s.faults[1].kind, FaultKind::kFlap);
  EXPECT_EQ(s.faults[1].count, 6);
  EXPECT_TRUE(node_exists(s, s.faults[1].a));
  EXPECT_TRUE(node_exists(s, s.faults[1].b));

  EXPECT_EQ(s.expect.max_stall_ms, 1500);
  EXPECT_EQ(s.failover.host_routes, "withdraw");
  EXPECT_EQ(s.expect.min_busbw_fraction, 0.8);
}

TEST(ScenarioLoad, MiniLoads) {
  Scenario s = load_ok(TB_SOURCE_DIR "/scenarios/mini.toml");
  EXPECT_EQ(s.lab, "mini");
  ASSERT_EQ(s.regions.size(), 1u);
  const Region& r = s.regions[0];
  EXPECT_EQ(r.servers, 2);
  EXPECT_EQ(r.gpus_per_server, 2);
  EXPECT_EQ(s.rails(r), 1);
  EXPECT_FALSE(r.dual_tor);
  EXPECT_EQ(r.spines, 0);
  EXPECT_TRUE(s.wans.empty());
  EXPECT_TRUE(s.profiles.contains("hpn"));
  EXPECT_TRUE(node_exists(s, r.name + "/tor0"));
  EXPECT_FALSE(node_exists(s, r.name + "/tor1"));
}

TEST(ScenarioLoad, DefaultsAndAlternateForms) {
  auto s = load_text(R"([lab]
name = "t"

[profiles.hpn]
rate = "100gbit"
jitter = 0
loss = 0.5

[[region]]
name = "hz"
servers = 2
gpus_per_server = 4
rails = 2
scale_up = "pcie"
rail = "hpn"
frontend = "vpc"

[[workload]]
name = "a"
kind = "collective"
op = "alltoall"
ranks = ["hz-s0-g1", "hz/s1"]
min_bytes = 1024
)",
                     "t.toml");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->address_space.to_string(), "198.18.0.0/15");
  EXPECT_EQ(s->scale.bandwidth, 1000);
  // A declared profile named like a preset replaces it; it does not inherit from it.
  EXPECT_EQ(s->profile("hpn").rate, parse_rate("100gbit").value());
  EXPECT_EQ(s->profile("hpn").mtu, 1500);
  EXPECT_EQ(s->profile("hpn").loss_pct, 0.5);
  EXPECT_EQ(s->profile("pcie").preset, "pcie");
  EXPECT_EQ(s->rails(s->regions[0]), 2);
  EXPECT_EQ(s->regions[0].spines, 1);
  EXPECT_FALSE(s->regions[0].dual_tor);
  const Workload& w = s->workloads[0];
  EXPECT_EQ(w.algo, "ring");
  EXPECT_EQ(w.rank_selectors, (std::vector<std::string>{"hz/s0/g1", "hz/s1"}));
  EXPECT_EQ(w.ranks, "hz/s0/g1,hz/s1");
  EXPECT_EQ(w.min_bytes, 1024u);
  EXPECT_EQ(w.iters, 20);
  EXPECT_EQ(w.channels, 1);
}

TEST(ScenarioLoad, SingleWanLinkIsImpliedOnTransitRouterFaults) {
  auto s = load_text(R"([lab]
name = "t"
[[region]]
name = "a"
servers = 1
gpus_per_server = 1
scale_up = "nvlink"
rail = "hpn"
frontend = "vpc"
[[region]]
name = "b"
servers = 1
gpus_per_server = 1
scale_up = "nvlink"
rail = "hpn"
frontend = "vpc"
[[wan]]
name = "cen"
between = ["a", "b"]
profile = "cen"
[[fault]]
at = "1s"
kind = "latency"
a = "a-tr"
b = "b/tr"
delay = "50ms"
[[fault]]
at = "2s"
kind = "partition"
regions = ["a", "b"]
[[fault]]
at = "3s"
kind = "node-crash"
node = "a/tor0"
[[fault]]
at = "4s"
kind = "rank-kill"
node = "b/s0/g0"
)",
                     "t.toml");
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->faults.size(), 4u);
  EXPECT_EQ(s->faults[0].a, "a/tr");
  EXPECT_EQ(s->faults[0].link, "cen");
  EXPECT_EQ(s->faults[0].delay.ns, 50'000'000);
  EXPECT_EQ(s->faults[1].region_a, "a");
  EXPECT_EQ(s->faults[1].region_b, "b");
  EXPECT_EQ(s->faults[2].node, "a/tor0");
  EXPECT_EQ(s->faults[3].node, "b/s0/g0");
}

TEST(Presets, AllHaveFiguresAndSources) {
  auto names = preset_names();
  EXPECT_EQ(names.size(), 7u);
  for (const auto& n : names) {
    auto p = preset(n);
    ASSERT_TRUE(p) << n;
    EXPECT_EQ(p->name, n);
    EXPECT_EQ(p->preset, n);
    EXPECT_GT(p->rate.bps, 0) << n;
    EXPECT_GT(p->delay.ns, 0) << n;
    EXPECT_FALSE(p->source.empty()) << n;
  }
  EXPECT_FALSE(preset("nope"));
  EXPECT_EQ(preset("nvlink")->rate.bps, 900e9 * 8);
  EXPECT_EQ(preset("nvlink")->delay.ns, 100);
  EXPECT_EQ(preset("nvlink")->mtu, 9000);
  EXPECT_EQ(preset("pcie")->rate.bps, 64e9 * 8);
  EXPECT_EQ(preset("hpn")->rate.bps, 400e9);
  EXPECT_EQ(preset("hpn")->mtu, 4200);
  EXPECT_EQ(preset("hpn")->delay.ns, 2000);
  EXPECT_EQ(preset("vpc")->rate.bps, 25e9);
  EXPECT_EQ(preset("vpc")->delay.ns, 250'000);
  EXPECT_EQ(preset("cen")->delay.ns, 25'000'000);
  EXPECT_EQ(preset("express-connect")->rate.bps, 400e9);
  EXPECT_EQ(preset("vpn")->rate.bps, 1e9);
  EXPECT_EQ(preset("vpn")->jitter.ns, 1'000'000);
  EXPECT_EQ(preset("vpn")->mtu, 1400);
}

// Congestion models (issue 32): hpn is lossless with its thresholds, every other preset
// droptail; a profile may write its own; [congestion] keeps Juniper's defaults unless written.
TEST(ScenarioLoad, CongestionDefaultsAndKeys) {
  auto hpn = preset("hpn");
  ASSERT_TRUE(hpn);
  EXPECT_EQ(hpn->congestion.model, "lossless");
  EXPECT_FALSE(hpn->congestion.written);
  EXPECT_EQ(hpn->congestion.xoff, 200u << 10);
  EXPECT_EQ(hpn->congestion.xon, 160u << 10);
  EXPECT_EQ(hpn->congestion.headroom, 106u << 10);
  EXPECT_EQ(hpn->congestion.buffer, 1u << 20);
  // vpc marks ECN with DCQCN's thresholds (Kmin 5 KB, Kmax 200 KB, Pmax 1%).
  auto vpc = preset("vpc");
  ASSERT_TRUE(vpc);
  EXPECT_EQ(vpc->congestion.model, "ecn");
  EXPECT_EQ(vpc->congestion.kmin, 5u << 10);
  EXPECT_EQ(vpc->congestion.kmax, 200u << 10);
  EXPECT_DOUBLE_EQ(vpc->congestion.pmax_pct, 1.0);
  for (const auto& name : preset_names()) {
    if (name != "hpn" && name != "vpc") {
      EXPECT_EQ(preset(name)->congestion.model, "droptail") << name;
    }
  }

  auto s = load_text(R"([lab]
name = "t"

[profiles.rail]
preset = "hpn"
xoff = "300K"

[profiles.fe]
preset = "vpc"
congestion = "lossless"
xoff = "64K"
xon = "32K"

[profiles.wan]
rate = "10gbit"
congestion = "droptail"

[congestion]
poll = "2ms"
watchdog_action = "forward"

[[region]]
name = "hz"
servers = 1
gpus_per_server = 1
scale_up = "nvlink"
rail = "rail"
frontend = "fe"
)",
                     "x.toml");
  ASSERT_TRUE(s) << s.error().message;
  const auto& rail = s->profile("rail").congestion;
  EXPECT_EQ(rail.model, "lossless");
  EXPECT_FALSE(rail.written);
  EXPECT_EQ(rail.xoff, 300u << 10);
  EXPECT_EQ(rail.xon, 160u << 10);  // the preset's
  const auto& fe = s->profile("fe").congestion;
  EXPECT_EQ(fe.model, "lossless");
  EXPECT_TRUE(fe.written);
  EXPECT_EQ(fe.loc.line, 10);
  EXPECT_EQ(fe.xon, 32u << 10);
  EXPECT_EQ(s->profile("wan").congestion.model, "droptail");
  EXPECT_TRUE(s->profile("wan").congestion.written);
  EXPECT_EQ(s->congestion.poll.ns, 2'000'000);
  EXPECT_EQ(s->congestion.idle_poll.ns, 10'000'000);
  EXPECT_EQ(s->congestion.late_budget.ns, 1'000'000);
  EXPECT_EQ(s->congestion.watchdog.ns, 200'000'000);
  EXPECT_EQ(s->congestion.watchdog_restore.ns, 200'000'000);
  EXPECT_EQ(s->congestion.watchdog_action, "forward");
}

}  // namespace
}  // namespace tb::scenario
