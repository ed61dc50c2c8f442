// Lossless rails end to end (issue 32 P5, docs/design-congestion.md §3): a lab of 5 servers × 1
// GPU behind one ToR (`hpn` rails: lossless by default, with its congestion agent), 4 GPUs × 2
// TCP streams (`tb-probe goodput`) into the fifth GPU for 6 s. Lossless: 0 drops in every rail
// qdisc (ToR egress and GPU NIC queues, root qdiscs as `tc -s` shows them), retransmits ≤ 0.1%
// of the data segments, the receiver ≥ 0.9 of the port. The same lab with the rail profile's
// `congestion = "droptail"` drops at the ToR and retransmits ≥ 5%. P6: the counters users see
// (status, watch, congestion.jsonl) during a shorter incast on the lossless lab.
//
// Host-bound guard: a lossless run that misses is NOT JUDGED (skipped, saying why) when the host
// explains it: its CPUs were ≥ verify::kHostBusyShare busy over the window (/proc/stat, as
// verify/host.h reads it) or the agent's stats show polls later than its late budget
// (late_polls > 0 with late_ms_max beyond 2 × the budget: the headroom covers one budget).
// Until the scenario keys and the plan's agent op (P1, P2) are merged, the scenario is refused
// or the plan starts no agent, and the test says so and skips. Lab names start with "cg".
//
// P8, `pfc-storm` (design §6): on 3 servers × 1 GPU, a stream s0 -> s2 while `testbedctl fault
// pfc-storm dc/s2/g0 --for 1s` holds the ToR port facing s2 paused: the watchdog's first
// pfcwd_detect comes 200 ms (the [congestion] watchdog default) ± 10% after the fault's
// effective time (the agent's answer), both from the lab's events.jsonl; after the revert the
// port's TBF runs at its rate again and a new stream through it gets ≥ 0.5 of the port. A late
// detection that the agent's own late polls explain is NOT JUDGED (skipped, saying why).
//
// P7, ECN on the VPC (design §4): 5 servers behind the VPC (`vpc`: ecn by default, 25 Mbit/s
// at scale 1000), 4 servers × 2 TCP streams into the fifth server's `fe` for 6 s. With ecn the
// stage just after the VPC port dc/vpc:s4 marks CE (the agent's stats count ce_marks > 0, as
// `status --json` shows them) and the senders, whose route to s4 (the plan's own route for the
// VPC subnet) names a CE-aware TCP (plan::kEcnCongctl), retransmit at least kEcnRetransmitCut
// times fewer segments than the same lab with `congestion = "droptail"` on the frontend, which
// drops at that port. A miss is NOT JUDGED when the host explains it (CPUs >=
// verify::kHostBusyShare busy, or the agent's polls late by more than 2 ms in the ecn run).
// That subnet route is the plan's (the address has IFA_F_NOPREFIXROUTE), so a server's fe link
// down drops it and `link up` must put it back, congctl and all: checked on its own lab.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "congestion/counters.h"
#include "congestion/episodes.h"
#include "congestion/stats.h"
#include "e2e_util.h"
#include "lab/state.h"
#include "plan/congestion.h"
#include "verify/host.h"

namespace tb::e2e::congestion_e2e {
namespace {

constexpr double kPortBps = 400e6;  // hpn's 400 Gbit/s at [scale] bandwidth = 1000
constexpr int kSeconds = 6;
constexpr int kSenders = 4, kStreams = 2;
// The VPC incast: ecn retransmits at least this many times fewer segments than drop-tail.
// Issue 32's target is 5; measured (2026-12-05, quiet lock, docs/figures.md "Congestion: ECN on
// the VPC"): this test 5 runs, ecn 0-21 vs drop-tail 2,879-4,119 (>= 164x); bench-congestion's
// same 4 x 2 incast 8 runs, ecn 2-74 vs drop-tail 2,891-4,717: the worst pairing 39x. 20
// leaves that a margin of 2 and still fails what senders on bbr gave before the VPC subnet's
// route named cubic (ecn 3,362-4,090 vs drop-tail 2,967-4,024: about as many).
constexpr uint64_t kEcnRetransmitCut = 20;

// 5 servers x 1 GPU behind one ToR; the tier `tier` ("rail" or "frontend") takes a profile of
// `preset` with congestion `model` ("" = the preset's default), the other its usual preset.
std::string lab_text(const std::string& lab, const std::string& tier, const std::string& preset,
                     const std::string& model) {
  std::string s = "[lab]\nname = \"" + lab + "\"\n[profiles.cgx]\npreset = \"" + preset + "\"\n";
  if (!model.empty()) s += "congestion = \"" + model + "\"\n";
  s += "[[region]]\nname = \"dc\"\nservers = 5\ngpus_per_server = 1\nrails = 1\n"
       "scale_up = \"nvlink\"\nspines = 0\n";
  s += tier == "rail" ? "rail = \"cgx\"\nfrontend = \"vpc\"\n"
                      : "rail = \"hpn\"\nfrontend = \"cgx\"\n";
  return s;
}

// The rail incast's lab: `hpn` rails with `model`.
std::string scenario_text(const std::string& model) {
  return lab_text("cg", "rail", "hpn", model);
}

std::string probe_bin() {
  return std::filesystem::path(TB_TESTBEDCTL).parent_path() / "tb-probe";
}

// `s` without its trailing newlines and spaces (a sysctl's value as sysctl -n prints it).
std::string chomp(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

nlohmann::json last_json(const std::string& out) {
  nlohmann::json last;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) last = j;
  }
  return last;
}

// The first IPv4 address of `dev` in `netns` ("" when none).
std::string addr_of(const std::string& netns, const std::string& dev) {
  auto r = sh("ip -n " + netns + " -4 -o addr show dev " + dev);
  auto p = r.out.find("inet ");
  if (p == std::string::npos) return "";
  return r.out.substr(p + 5, r.out.find('/', p) - p - 5);
}

// Drops of every root qdisc in `netns` (on `dev` only when given), from `tc -s -j`.
uint64_t root_drops(const std::string& netns, const std::string& dev = "") {
  auto r =
      sh("ip netns exec " + netns + " tc -s -j qdisc show" + (dev.empty() ? "" : " dev " + dev));
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  uint64_t n = 0;
  if (!j.is_array()) return n;
  for (const auto& q : j)
    if (q.value("root", false)) n += q.value("drops", uint64_t{0});
  return n;
}

// The rate of the root TBF on `dev` in `netns`, as `tc -j` prints it (0 when none).
double root_rate(const std::string& netns, const std::string& dev) {
  auto j = nlohmann::json::parse(sh("ip netns exec " + netns + " tc -j qdisc show dev " + dev).out,
                                 nullptr, false);
  if (!j.is_array()) return 0;
  for (const auto& q : j)
    if (q.value("root", false) && q.value("kind", "") == "tbf" && q.contains("options"))
      return q["options"].value("rate", 0.0);
  return 0;
}

struct Incast {
  std::string skip;  // why the run cannot be made (the scenario key or the agent is missing)
  uint64_t tor_drops = 0, nic_drops = 0;
  uint64_t retransmits = 0, segments = 0;
  double goodput_bps = 0;
  double cpu_busy = 0;         // verify's host guard's share (the idle cgroup left out)
  double rail_rate_ratio = 0;  // sender 0's rail TBF rate over sender 1's, after the incast
  bool agent = false;
  congestion::AgentStats stats;
  std::string text() const {
    char b[512];
    std::snprintf(
        b, sizeof b,
        "ToR drops %llu, NIC drops %llu, %llu of %llu segments retransmitted (%.3f%%), "
        "receiver %.3f of the port, CPUs %.0f%% busy; agent: %s",
        static_cast<unsigned long long>(tor_drops), static_cast<unsigned long long>(nic_drops),
        static_cast<unsigned long long>(retransmits), static_cast<unsigned long long>(segments),
        segments ? 100.0 * static_cast<double>(retransmits) / static_cast<double>(segments) : 0.0,
        goodput_bps / kPortBps, 100 * cpu_busy, agent ? "" : "none");
    std::string s = b;
    if (agent) {
      std::snprintf(b, sizeof b,
                    "%llu polls, %llu late (max %.2f ms), poll p99 %.3f ms, cpu %.2f s over %.1f s "
                    "(%.1f%%)",
                    static_cast<unsigned long long>(stats.polls),
                    static_cast<unsigned long long>(stats.late_polls), stats.late_ms_max,
                    stats.poll_ms_p99, stats.cpu_s, stats.uptime_s,
                    stats.uptime_s > 0 ? 100 * stats.cpu_s / stats.uptime_s : 0.0);
      s += b;
    }
    return s;
  }
};

// The frontend incast of P7: the `vpc` frontend with `model` ("" = its default, ecn).
std::string fe_scenario(const std::string& model) {
  return lab_text("cf", "frontend", "vpc", model);
}

struct FeIncast {
  bool up = false;
  uint64_t port_drops = 0;  // the VPC port toward s4 (root qdisc of dc/vpc's s4)
  uint64_t retransmits = 0, segments = 0;
  double goodput_bps = 0;
  double cpu_busy = 0;
  uint64_t ce_marks = 0, ect = 0;  // the agent's stats for dc/vpc:s4
  uint64_t status_ce = 0;          // status --json's ce_marks for that end
  double late_ms_max = 0;
  uint64_t late_polls = 0;
  std::string tcp_ecn;   // net.ipv4.tcp_ecn in s0's namespace
  std::string route_cc;  // the congctl of s0's route toward s4 ("" when it names none)
  std::string cc;        // its congestion control toward s4: route_cc, else the default
  std::string text() const {
    return fmt::format(
        "VPC port drops {}, {} of {} segments retransmitted ({:.3f}%), receiver {:.3f} of the "
        "port, CE marks {} of {} ECT packets (status: {}), CPUs {:.0f}% busy, agent {} late "
        "polls (max {:.2f} ms), tcp_ecn {}, congestion control {}",
        port_drops, retransmits, segments,
        segments ? 100.0 * static_cast<double>(retransmits) / static_cast<double>(segments) : 0.0,
        goodput_bps / 25e6, ce_marks, ect, status_ce, 100 * cpu_busy, late_polls, late_ms_max,
        tcp_ecn, cc);
  }
};

class Congestion : public testing::Test {
 protected:
  void SetUp() override {
    TB_REQUIRE_ROOT();
    dir_ = std::filesystem::temp_directory_path() / ("tb-cg-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    guard_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // One lab with the rail's `model` ("" = the preset's default), the incast, the lab down. With
  // `rail_rate`, sender 0's rail is first `link set` to that rate.
  Incast run(const std::string& model, const std::string& prefix,
             const std::string& rail_rate = "") {
    Incast out;
    const std::string file = (dir_ / (prefix + ".toml")).string();
    std::ofstream(file) << scenario_text(model);
    auto v = testbedctl("validate " + file);
    EXPECT_EQ(v.rc, 0) << v.out;
    if (v.rc != 0) {
      out.skip = "the scenario is refused: " + v.out;
      return out;
    }
    const std::string lab = unique_lab(prefix);
    guard_ = std::make_unique<LabGuard>(lab);
    auto up = testbedctl("up " + file + " --name " + lab);
    EXPECT_EQ(up.rc, 0) << up.out;
    if (up.rc != 0) return out;
    if (!rail_rate.empty()) {
      // Unlimited would leave the agent nothing to pause: refused, the link as it was.
      auto unlimited = testbedctl("link " + lab + " set dc/s0/g0 dc/tor0 --rate 0");
      EXPECT_EQ(unlimited.rc, 2) << unlimited.out;
      EXPECT_TRUE(contains(unlimited.out, "on a lossless link")) << unlimited.out;
      auto ls = testbedctl("link " + lab + " set dc/s0/g0 dc/tor0 --rate " + rail_rate);
      EXPECT_EQ(ls.rc, 0) << ls.out;
    }
    const std::string stats_path = lab::lab_dir(lab) + "/stages/" + congestion::kStatsFile;
    const std::string tor = ns(lab, "dc/tor0"), rx = ns(lab, "dc/s4/g0");
    const std::string to = addr_of(rx, "rail");
    EXPECT_FALSE(to.empty());
    if (to.empty()) return out;
    const std::string probe = probe_bin();
    auto server = sh("ip netns exec " + rx + " " + probe + " serve --port 7601 --seconds " +
                     std::to_string(kSeconds + 20) + " >/dev/null 2>&1 & echo $!");
    const int server_pid = std::atoi(server.out.c_str());
    EXPECT_GT(server_pid, 0);
    ::usleep(300'000);
    uint64_t tor0 = root_drops(tor), nic0 = 0;
    for (int s = 0; s < kSenders; ++s)
      nic0 += root_drops(ns(lab, "dc/s" + std::to_string(s) + "/g0"), "rail");
    // Every stream in the background of one shell, which waits for all (each bounded by
    // --seconds and its drain).
    std::string cmd = "(";
    std::vector<std::string> outs;
    for (int s = 0; s < kSenders; ++s)
      for (int k = 0; k < kStreams; ++k) {
        outs.push_back(
            (dir_ / (prefix + "-" + std::to_string(s) + "-" + std::to_string(k))).string());
        cmd += "ip netns exec " + ns(lab, "dc/s" + std::to_string(s) + "/g0") + " " + probe +
               " goodput --to " + to + " --port 7601 --seconds " + std::to_string(kSeconds) +
               " --warmup-ms 1000 >" + outs.back() + " 2>&1 & ";
      }
    cmd += "wait)";
    const auto c0 = verify::sample_host({});
    sh(cmd);
    const auto host = verify::host_load(c0, verify::sample_host({}));
    ::usleep(500'000);  // what the senders still hold drains
    out.tor_drops = root_drops(tor) - tor0;
    uint64_t nic1 = 0;
    for (int s = 0; s < kSenders; ++s)
      nic1 += root_drops(ns(lab, "dc/s" + std::to_string(s) + "/g0"), "rail");
    out.nic_drops = nic1 - nic0;
    for (const auto& f : outs) {
      auto j = last_json(read_text(f));
      EXPECT_TRUE(j.contains("goodput_bps")) << f << ": " << read_text(f);
      out.goodput_bps += j.value("goodput_bps", 0.0);
      out.retransmits += j.value("retransmits", uint64_t{0});
      out.segments += j.value("data_segs_out", uint64_t{0});
    }
    out.cpu_busy = std::max(0.0, host.cpu_busy);
    const double r1 = root_rate(ns(lab, "dc/s1/g0"), "rail");
    out.rail_rate_ratio = r1 > 0 ? root_rate(ns(lab, "dc/s0/g0"), "rail") / r1 : 0;
    if (auto st = congestion::read_stats(stats_path)) {
      out.agent = true;
      out.stats = *st;
    }
    if (server_pid > 0) ::kill(server_pid, SIGTERM);
    guard_.reset();  // down now: the next lab has the host to itself
    return out;
  }

  // The frontend incast: 4 servers x 2 streams into s4's fe for kSeconds, the lab down after.
  FeIncast run_fe(const std::string& model, const std::string& prefix) {
    FeIncast out;
    const std::string file = (dir_ / (prefix + ".toml")).string();
    std::ofstream(file) << fe_scenario(model);
    const std::string lab = unique_lab(prefix);
    guard_ = std::make_unique<LabGuard>(lab);
    auto up = testbedctl("up " + file + " --name " + lab);
    EXPECT_EQ(up.rc, 0) << up.out;
    if (up.rc != 0) return out;
    out.up = true;
    const std::string vpc = ns(lab, "dc/vpc"), rx = ns(lab, "dc/s4");
    const std::string to = addr_of(rx, "fe");
    EXPECT_FALSE(to.empty());
    if (to.empty()) return out;
    out.tcp_ecn =
        chomp(sh("ip netns exec " + ns(lab, "dc/s0") + " sysctl -n net.ipv4.tcp_ecn").out);
    // The senders' congestion control: the route's congctl toward the receiver, else the
    // namespace's default. Server to server the VPC is one subnet: with ecn the plan's own
    // route for it, which names kEcnCongctl (plan/congestion.h set_ecn_congctl); with droptail
    // the kernel's connected route, which names none.
    const auto route = sh("ip -n " + ns(lab, "dc/s0") + " route get " + to).out;
    if (const auto at = route.find("congctl "); at != std::string::npos)
      out.route_cc = route.substr(at + 8, route.find_first_of(" \n", at + 8) - at - 8);
    out.cc = out.route_cc.empty() ? chomp(sh("ip netns exec " + ns(lab, "dc/s0") +
                                             " sysctl -n net.ipv4.tcp_congestion_control")
                                              .out)
                                  : out.route_cc;
    const std::string probe = probe_bin();
    auto server = sh("ip netns exec " + rx + " " + probe + " serve --port 7603 --seconds " +
                     std::to_string(kSeconds + 20) + " >/dev/null 2>&1 & echo $!");
    const int server_pid = std::atoi(server.out.c_str());
    EXPECT_GT(server_pid, 0);
    ::usleep(300'000);
    const uint64_t drops0 = root_drops(vpc, "s4");
    const std::string stats_path = lab::lab_dir(lab) + "/stages/" + congestion::kStatsFile;
    uint64_t ce0 = 0, ect0 = 0;
    if (auto st = congestion::read_stats(stats_path))
      if (auto p = st->ports.find("dc/vpc:s4"); p != st->ports.end())
        ce0 = p->second.ecn.ce_marks, ect0 = p->second.ecn.ect;
    std::string cmd = "(";
    std::vector<std::string> outs;
    for (int s = 0; s < kSenders; ++s)
      for (int k = 0; k < kStreams; ++k) {
        outs.push_back(
            (dir_ / (prefix + "-" + std::to_string(s) + "-" + std::to_string(k))).string());
        cmd += "ip netns exec " + ns(lab, "dc/s" + std::to_string(s)) + " " + probe +
               " goodput --to " + to + " --port 7603 --seconds " + std::to_string(kSeconds) +
               " --warmup-ms 1000 >" + outs.back() + " 2>&1 & ";
      }
    cmd += "wait)";
    const auto c0 = verify::sample_host({});
    sh(cmd);
    out.cpu_busy = std::max(0.0, verify::host_load(c0, verify::sample_host({})).cpu_busy);
    ::usleep(500'000);
    out.port_drops = root_drops(vpc, "s4") - drops0;
    for (const auto& f : outs) {
      auto j = last_json(read_text(f));
      EXPECT_TRUE(j.contains("goodput_bps")) << f << ": " << read_text(f);
      out.goodput_bps += j.value("goodput_bps", 0.0);
      out.retransmits += j.value("retransmits", uint64_t{0});
      out.segments += j.value("data_segs_out", uint64_t{0});
    }
    if (auto st = congestion::read_stats(stats_path)) {
      out.late_polls = st->late_polls;
      out.late_ms_max = st->late_ms_max;
      if (auto p = st->ports.find("dc/vpc:s4"); p != st->ports.end()) {
        out.ce_marks = p->second.ecn.ce_marks - ce0;
        out.ect = p->second.ecn.ect - ect0;
      }
    }
    auto status = status_json(lab);
    for (const auto& l : status.value("links", nlohmann::json::array()))
      for (const char* side : {"a", "b"})
        if (l.contains("congestion") && l["congestion"].contains(side) &&
            l["congestion"][side].is_object() &&
            l["congestion"][side].value("end", "") == "dc/vpc:s4")
          out.status_ce = l["congestion"][side].value("ce_marks", uint64_t{0});
    if (server_pid > 0) ::kill(server_pid, SIGTERM);
    guard_.reset();
    return out;
  }

  std::filesystem::path dir_;
  std::unique_ptr<LabGuard> guard_;
};

// ECN on the VPC: the stage marks the incast's ECT packets CE at the receiver's VPC port, the
// servers negotiate ECN, status counts the marks, and the senders' TCP reacts to CE: their route
// to s4 (the plan's own route for the VPC subnet) names kEcnCongctl, where the host's default
// (bbr here) ignores CE; the drop-tail lab keeps the kernel's connected route, without one. The
// marks cut retransmits at least kEcnRetransmitCut times against drop-tail.
TEST_F(Congestion, EcnOnTheVpcMarksCeNegotiatesAndCountsAndCutsRetransmitsWithACeAwareTcp) {
  const FeIncast e = run_fe("", "cfe");
  ASSERT_TRUE(e.up);
  std::printf("[congestion] ecn VPC incast 4x2 -> 1: %s\n", e.text().c_str());
  const FeIncast d = run_fe("droptail", "cfd");
  ASSERT_TRUE(d.up);
  std::printf("[congestion] droptail VPC incast 4x2 -> 1: %s\n", d.text().c_str());
  EXPECT_EQ(e.tcp_ecn, "1") << "the plan sets tcp_ecn = 1 in the servers of an ecn region";
  EXPECT_GT(e.ce_marks, 0u) << e.text();
  EXPECT_GT(e.status_ce, 0u) << "status --json shows no ce_marks for dc/vpc:s4: " << e.text();
  EXPECT_EQ(d.ce_marks, 0u) << d.text();
  EXPECT_GT(d.segments, 0u);
  EXPECT_EQ(e.route_cc, plan::kEcnCongctl)
      << "s0's route to s4 over the VPC subnet names no CE-aware congctl: " << e.text();
  EXPECT_EQ(d.route_cc, "") << "a droptail VPC's routes name no congctl: " << d.text();
  std::printf("[congestion] retransmits ecn %llu (%s), droptail %llu (%s): %.1fx fewer\n",
              static_cast<unsigned long long>(e.retransmits), e.cc.c_str(),
              static_cast<unsigned long long>(d.retransmits), d.cc.c_str(),
              static_cast<double>(d.retransmits) /
                  static_cast<double>(std::max<uint64_t>(1, e.retransmits)));
  const bool missed = d.retransmits == 0 || kEcnRetransmitCut * e.retransmits > d.retransmits;
  const bool late = e.late_polls > 0 && e.late_ms_max > 2.0;
  if (missed &&
      (e.cpu_busy >= verify::kHostBusyShare || d.cpu_busy >= verify::kHostBusyShare || late))
    GTEST_SKIP() << "NOT JUDGED: host-bound (CPUs " << 100 * e.cpu_busy << "% / "
                 << 100 * d.cpu_busy << "% busy, agent " << e.late_polls << " polls late, max "
                 << e.late_ms_max << " ms): ecn " << e.text() << "; droptail " << d.text();
  EXPECT_GT(d.retransmits, 0u) << "droptail did not retransmit: no incast? " << d.text();
  EXPECT_LE(kEcnRetransmitCut * e.retransmits, d.retransmits)
      << "ecn " << e.text() << "\ndroptail " << d.text();
}

// An ecn region's VPC subnet route is the plan's, not the kernel's connected route: taking s0's fe
// link down drops it (as the kernel drops every route through a down port) and `link up` puts it
// back from the journal with its congctl, scope and source; s0 then reaches s1 over it. No
// kernel-made route for the subnet at any point.
TEST_F(Congestion, EcnVpcSubnetRouteComesBackWithItsCongctlAfterTheServersFeLinkFlaps) {
  const std::string file = (dir_ / "cff.toml").string();
  std::ofstream(file) << fe_scenario("");
  const std::string lab = unique_lab("cff");
  guard_ = std::make_unique<LabGuard>(lab);
  auto up = testbedctl("up " + file + " --name " + lab);
  ASSERT_EQ(up.rc, 0) << up.out;
  const std::string s0 = ns(lab, "dc/s0");
  const std::string to = addr_of(ns(lab, "dc/s1"), "fe");
  ASSERT_FALSE(to.empty());
  const std::string own = sh("ip -n " + s0 + " -4 -o addr show dev fe").out;
  EXPECT_NE(own.find("noprefixroute"), std::string::npos) << own;
  const std::string src = addr_of(s0, "fe");
  // The routes through fe, one line each: the subnet's and the default.
  auto fe_routes = [&] { return sh("ip -n " + s0 + " route show dev fe").out; };
  auto subnet_line = [&](const std::string& routes) {
    std::istringstream in(routes);
    for (std::string line; std::getline(in, line);)
      if (line.find("scope link") != std::string::npos) return line;
    return std::string();
  };
  const std::string before = fe_routes();
  const std::string line = subnet_line(before);
  ASSERT_FALSE(line.empty()) << "no subnet route through fe in dc/s0:\n" << before;
  EXPECT_NE(line.find("proto static"), std::string::npos) << line;
  EXPECT_NE(line.find("src " + src), std::string::npos) << line;
  EXPECT_NE(line.find(std::string("congctl ") + plan::kEcnCongctl), std::string::npos) << line;
  EXPECT_EQ(before.find("proto kernel"), std::string::npos) << before;

  auto down = testbedctl("link " + lab + " down dc/s0:fe dc/vpc:s0");
  ASSERT_EQ(down.rc, 0) << down.out;
  EXPECT_EQ(subnet_line(fe_routes()), "") << "the kernel kept the subnet route of a down port";
  auto again = testbedctl("link " + lab + " up dc/s0:fe dc/vpc:s0");
  ASSERT_EQ(again.rc, 0) << again.out;
  const std::string after = fe_routes();
  EXPECT_EQ(subnet_line(after), line) << "before:\n" << before << "after:\n" << after;
  EXPECT_NE(after.find("default via"), std::string::npos) << after;
  EXPECT_EQ(after.find("proto kernel"), std::string::npos) << after;
  const std::string get = sh("ip -n " + s0 + " route get " + to).out;
  EXPECT_NE(get.find(std::string("congctl ") + plan::kEcnCongctl), std::string::npos) << get;
  // Reachable over it (ARP after the flap may take a first probe: 3 tries, 1 s each at most).
  EXPECT_EQ(sh("ip netns exec " + s0 + " ping -c 3 -W 1 -i 0.2 " + to +
               " >/dev/null 2>&1 && "
               "echo ok || echo lost")
                .out,
            "ok\n");
}

// Sender 0's rail is `link set` to 300 Mbit/s first: every resume restores what the pause found
// in force, so after the incast's pauses its rate limiter still runs at 3/4 of the others'.
TEST_F(Congestion, LosslessRailsIncastHasNoRailDropsFewRetransmitsAndFillsThePort) {
  const Incast r = run("", "cgl", "300mbit");
  ASSERT_TRUE(r.skip.empty()) << r.skip;
  std::printf("[congestion] lossless incast 4x2 -> 1: %s\n", r.text().c_str());
  ASSERT_TRUE(r.agent) << "the plan started no congestion agent for hpn's lossless rails";
  EXPECT_NEAR(r.rail_rate_ratio, 0.75, 0.01) << "the link set rate did not hold: " << r.text();
  uint64_t pauses = 0;
  for (const auto& [name, u] : r.stats.upstreams) pauses += u.pauses;
  EXPECT_GT(pauses, 0u) << "no pause at all: the incast did not congest: " << r.text();
  const bool missed =
      r.tor_drops + r.nic_drops > 0 ||
      static_cast<double>(r.retransmits) > 0.001 * static_cast<double>(r.segments) ||
      r.goodput_bps < 0.9 * kPortBps;
  const bool late = r.stats.late_polls > 0 && r.stats.late_ms_max > 2.0;
  if (missed && (r.cpu_busy >= verify::kHostBusyShare || late))
    GTEST_SKIP() << "NOT JUDGED: host-bound (CPUs " << 100 * r.cpu_busy << "% busy, agent "
                 << r.stats.late_polls << " polls late, max " << r.stats.late_ms_max
                 << " ms): " << r.text();
  EXPECT_EQ(r.tor_drops, 0u) << r.text();
  EXPECT_EQ(r.nic_drops, 0u) << r.text();
  EXPECT_LE(static_cast<double>(r.retransmits), 0.001 * static_cast<double>(r.segments))
      << r.text();
  EXPECT_GE(r.goodput_bps, 0.9 * kPortBps) << r.text();
  EXPECT_GT(r.segments, 0u);
  EXPECT_EQ(r.stats.errors, 0u) << r.stats.last_error;
}

TEST_F(Congestion, DroptailRailsIncastDropsAtTheTorAndRetransmits) {
  const Incast r = run("droptail", "cgd");
  ASSERT_TRUE(r.skip.empty()) << r.skip;
  std::printf("[congestion] droptail incast 4x2 -> 1: %s\n", r.text().c_str());
  EXPECT_GT(r.tor_drops, 0u) << r.text();
  EXPECT_GE(static_cast<double>(r.retransmits), 0.05 * static_cast<double>(r.segments)) << r.text();
}

// P6, the counters users see (docs/design-congestion.md §5): during a 3 s incast (4 GPUs × 2
// streams into s4) `watch --json` shows the senders' rail queues paused and the ToR port
// feeding s4 sending pauses; afterwards `status --json` has that port's pauses_sent > 0 and
// each sender's pauses_received > 0 from the agent's stats file, its text the CONGESTION
// COUNTERS table, and congestion.jsonl the pause episodes (senders, by s4's port). Bounded: the
// streams end by --seconds, every wait is counted; the lab goes down when the test ends.
TEST_F(Congestion, CountersShowInStatusWatchAndTheEpisodeLogDuringAnIncast) {
  constexpr int kIncastSeconds = 3;
  const std::string file = (dir_ / "cgc.toml").string();
  std::ofstream(file) << scenario_text("");
  const std::string lab = unique_lab("cgc");
  guard_ = std::make_unique<LabGuard>(lab);
  auto up = testbedctl("up " + file + " --name " + lab);
  ASSERT_EQ(up.rc, 0) << up.out;
  const std::string rx = ns(lab, "dc/s4/g0"), to = addr_of(rx, "rail");
  ASSERT_FALSE(to.empty());
  const std::string probe = probe_bin();
  auto server = sh("ip netns exec " + rx + " " + probe + " serve --port 7602 --seconds " +
                   std::to_string(kIncastSeconds + 20) + " >/dev/null 2>&1 & echo $!");
  const int server_pid = std::atoi(server.out.c_str());
  ASSERT_GT(server_pid, 0);
  struct Kill {
    int pid;
    ~Kill() { ::kill(pid, SIGTERM); }
  } kill_server{server_pid};
  ::usleep(300'000);
  // Before any traffic: counted, and nothing paused yet on s4's port.
  auto idle = status_json(lab);
  ASSERT_TRUE(idle.contains("congestion")) << idle.dump();
  EXPECT_EQ(idle["congestion"]["state"], "counted") << idle["congestion"].dump();

  std::string cmd = "(";
  for (int s = 0; s < kSenders; ++s)
    for (int k = 0; k < kStreams; ++k)
      cmd += "ip netns exec " + ns(lab, "dc/s" + std::to_string(s) + "/g0") + " " + probe +
             " goodput --to " + to + " --port 7602 --seconds " + std::to_string(kIncastSeconds) +
             " --warmup-ms 0 & ";
  cmd += "wait) >/dev/null 2>&1 & echo $!";
  const int incast_pid = std::atoi(sh(cmd).out.c_str());
  ASSERT_GT(incast_pid, 0);
  // watch while it runs: 4 frames 0.5 s apart.
  auto w = testbedctl("watch " + lab + " --json --count 4 --interval 0.5");
  EXPECT_EQ(w.rc, 0) << w.out;
  double sender_paused = 0, port_sent = 0;
  std::string states;
  std::istringstream frames(w.out);
  for (std::string line; std::getline(frames, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    states += j["congestion"].value("state", "?") + " ";
    for (const auto& l : j["links"]) {
      if (!l.contains("pause")) continue;
      for (const char* dir : {"ab", "ba"}) {
        const auto& p = l["pause"][dir];
        const std::string sender = std::string(dir) == "ab" ? l["a"] : l["b"];
        if (sender.starts_with("dc/s") && sender.ends_with(":rail"))
          sender_paused = std::max(sender_paused, p.value("paused_fraction", 0.0));
        if (sender == "dc/tor0:s4g0")
          port_sent = std::max(port_sent, p.value("pauses_sent_per_s", 0.0));
      }
    }
  }
  EXPECT_GT(sender_paused, 0) << "watch showed no sender paused (states: " << states << ")\n"
                              << w.out.substr(0, 4000);
  EXPECT_GT(port_sent, 0) << "watch showed dc/tor0:s4g0 sending no pause\n"
                          << w.out.substr(0, 4000);
  // The incast's end: bounded by its --seconds (and a drain); then the episodes close.
  for (int i = 0; i < 200 && ::kill(incast_pid, 0) == 0; ++i) ::usleep(100'000);
  ::usleep(500'000);

  auto st = status_json(lab);
  ASSERT_TRUE(st.contains("congestion")) << st.dump();
  EXPECT_EQ(st["congestion"]["state"], "counted");
  EXPECT_EQ(st["congestion"]["source"], congestion::kCountersSource);
  uint64_t sent = 0, received = 0;
  for (const auto& l : st["links"]) {
    const auto& c = l["congestion"];
    for (const char* side : {"a", "b"}) {
      if (!c.contains(side) || !c[side].is_object()) continue;
      const std::string end = c[side]["end"];
      if (end == "dc/tor0:s4g0") sent = c[side].value("pauses_sent", uint64_t{0});
      if (end.starts_with("dc/s") && end != "dc/s4/g0:rail")
        received += c[side].value("pauses_received", uint64_t{0});
    }
  }
  std::printf(
      "[congestion] counters after a %d s incast: dc/tor0:s4g0 sent %llu pauses, the "
      "senders received %llu; %s\n",
      kIncastSeconds, static_cast<unsigned long long>(sent),
      static_cast<unsigned long long>(received), st["congestion"]["totals"].dump().c_str());
  EXPECT_GT(sent, 0u) << st["congestion"].dump();
  EXPECT_GT(received, 0u) << st["congestion"].dump();
  auto text = testbedctl("status " + lab);
  EXPECT_TRUE(contains(text.out, "CONGESTION COUNTERS (from the congestion agent's stats file"))
      << text.out;
  EXPECT_TRUE(contains(text.out, "\ndc/tor0:s4g0 ")) << text.out;

  const auto episodes =
      congestion::read_episodes(lab::lab_dir(lab) + "/" + congestion::kEpisodesFile, 0, INT64_MAX);
  size_t by_s4 = 0;
  for (const auto& e : episodes) {
    EXPECT_LE(e.t0_ns, e.t1_ns);
    EXPECT_GE(e.cycles, 1u);
    by_s4 += std::find(e.by.begin(), e.by.end(), "dc/tor0:s4g0") != e.by.end();
  }
  std::printf("[congestion] %zu pause episodes, %zu of them by dc/tor0:s4g0\n", episodes.size(),
              by_s4);
  EXPECT_GT(by_s4, 0u) << "no pause episode by s4's port in " << congestion::kEpisodesFile;
}

// The lab's events.jsonl lines named `name`.
std::vector<nlohmann::json> lab_events(const std::string& lab, const std::string& name) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_text(lab::lab_dir(lab) + "/events.jsonl"));
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == name) out.push_back(j);
  }
  return out;
}

TEST_F(Congestion, PfcStormIsDetectedByTheWatchdogAndTheRevertReturnsThePort) {
  std::string text = scenario_text("");
  text.replace(text.find("servers = 5"), 11, "servers = 3");
  const std::string file = (dir_ / "cgs.toml").string();
  std::ofstream(file) << text;
  const std::string lab = unique_lab("cgs");
  guard_ = std::make_unique<LabGuard>(lab);
  auto up = testbedctl("up " + file + " --name " + lab);
  ASSERT_EQ(up.rc, 0) << up.out;
  // A switch is not a storm's source: exit 2, naming what is valid.
  auto bad = testbedctl("fault " + lab + " pfc-storm dc/tor0 --for 1s");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_TRUE(contains(bad.out, "dc/tor0 is a tor, not a GPU")) << bad.out;
  EXPECT_TRUE(contains(bad.out, "GPUs with a lossless rail: dc/s0/g0, dc/s1/g0, dc/s2/g0"))
      << bad.out;

  const std::string tor = ns(lab, "dc/tor0"), rx = ns(lab, "dc/s2/g0");
  const std::string to = addr_of(rx, "rail");
  ASSERT_FALSE(to.empty());
  const double port_rate = root_rate(tor, "s2g0");
  ASSERT_GT(port_rate, 0);
  const std::string probe = probe_bin();
  auto server = sh("ip netns exec " + rx + " " + probe +
                   " serve --port 7602 --seconds 15 >/dev/null 2>&1 & echo $!");
  const int server_pid = std::atoi(server.out.c_str());
  ASSERT_GT(server_pid, 0);
  ::usleep(300'000);
  const std::string sender = "ip netns exec " + ns(lab, "dc/s0/g0") + " " + probe +
                             " goodput --to " + to + " --port 7602 ";
  // The stream runs 3 s; the storm starts 0.5 s in and lasts 1 s.
  const std::string during = (dir_ / "cgs-during").string();
  sh("(" + sender + "--seconds 3 --warmup-ms 200 >" + during + " 2>&1 &) ; sleep 0.5");
  auto storm = testbedctl("fault " + lab + " pfc-storm dc/s2/g0 --for 1s");
  EXPECT_EQ(storm.rc, 0) << storm.out;
  EXPECT_TRUE(contains(storm.out, "pfc-storm dc/s2/g0 (dc/tor0:s2g0)")) << storm.out;
  ::usleep(200'000);
  const double after_rate = root_rate(tor, "s2g0");
  const std::string after = (dir_ / "cgs-after").string();
  ::usleep(1'500'000);  // the first stream ends (its 3 s and drain)
  sh(sender + "--seconds 1 --warmup-ms 200 >" + after + " 2>&1");
  ::kill(server_pid, SIGTERM);
  const auto stats =
      congestion::read_stats(lab::lab_dir(lab) + "/stages/" + congestion::kStatsFile);

  const auto inject = lab_events(lab, "fault_inject");
  const auto revert = lab_events(lab, "fault_revert");
  const auto detect = lab_events(lab, "pfcwd_detect");
  const auto restore = lab_events(lab, "pfcwd_restore");
  ASSERT_EQ(inject.size(), 1u);
  ASSERT_EQ(revert.size(), 1u);
  ASSERT_FALSE(detect.empty()) << "no pfcwd_detect in events.jsonl";
  const int64_t eff = inject[0].value("effective_ns", int64_t{0});
  const double detect_ms = (detect[0].value("t_mono_ns", int64_t{0}) - eff) / 1e6;
  auto a = last_json(read_text(after));
  if (!a.is_object()) a = nlohmann::json::object();  // no result: the check below says so
  std::printf(
      "[congestion] pfc-storm dc/s2/g0 for 1 s: inject took %.1f ms, detected %.1f ms after it "
      "(paused_ms %.1f) at %s; %zu detections, %zu restores (dropped %llu); after the revert "
      "the port at %.0f of %.0f B/s, a new stream %.3f of the port; agent %llu late polls "
      "(max %.2f ms)\n",
      (eff - inject[0].value("requested_ns", eff)) / 1e6, detect_ms,
      detect[0].value("paused_ms", 0.0), detect[0].value("port", "").c_str(), detect.size(),
      restore.size(),
      static_cast<unsigned long long>(restore.empty() ? 0
                                                      : restore[0].value("dropped", uint64_t{0})),
      after_rate, port_rate, a.value("goodput_bps", 0.0) / kPortBps,
      static_cast<unsigned long long>(stats ? stats->late_polls : 0),
      stats ? stats->late_ms_max : 0.0);
  EXPECT_EQ(detect[0].value("port", ""), "dc/tor0:s2g0");
  EXPECT_EQ(inject[0].value("kind", ""), "pfc-storm");
  // 200 ms ± 10%, the effective time being the agent's answer (a poll after the hold began).
  // Late only by what a stalled agent explains (a poll later than the excess, as its stats say):
  // NOT JUDGED, the host's doing. Early is never excused.
  EXPECT_GE(detect_ms, 180.0);
  if (detect_ms > 220.0 && stats && stats->late_ms_max >= detect_ms - 220.0)
    GTEST_SKIP() << "NOT JUDGED: host-bound (detection " << detect_ms << " ms, agent polls late "
                 << "by up to " << stats->late_ms_max << " ms)";
  EXPECT_LE(detect_ms, 220.0);
  EXPECT_GE(detect[0].value("t_mono_ns", int64_t{0}), eff);
  EXPECT_LT(detect[0].value("t_mono_ns", int64_t{0}), revert[0].value("effective_ns", int64_t{0}));
  EXPECT_FALSE(restore.empty()) << "the mitigation never ended";
  EXPECT_DOUBLE_EQ(after_rate, port_rate) << "the port was not returned to its rate";
  EXPECT_GE(a.value("goodput_bps", 0.0), 0.5 * kPortBps) << read_text(after);
  ASSERT_TRUE(stats);
  ASSERT_TRUE(stats->ports.count("dc/tor0:s2g0"));
  EXPECT_FALSE(stats->ports.at("dc/tor0:s2g0").storm);
  EXPECT_GE(stats->ports.at("dc/tor0:s2g0").watchdog.trips, 1u);
  EXPECT_EQ(stats->control_error, "");
  // What users see of it: status names the watchdog's trips on that port, and its mitigation's
  // drops are not lossless violations.
  auto st = status_json(lab);
  bool found = false;
  for (const auto& l : st["links"])
    for (const char* side : {"a", "b"}) {
      const auto& e = l["congestion"][side];
      if (!e.is_object() || e.value("end", "") != "dc/tor0:s2g0") continue;
      found = true;
      EXPECT_GE(e["watchdog"].value("trips", uint64_t{0}), 1u) << e.dump();
      EXPECT_EQ(e.value("lossless_violations", uint64_t{1}), 0u) << e.dump();
      EXPECT_FALSE(e.value("storm", true)) << e.dump();
    }
  EXPECT_TRUE(found) << st.dump().substr(0, 4000);
  auto status_text = testbedctl("status " + lab);
  EXPECT_TRUE(contains(status_text.out, "dc/tor0:s2g0: PFC watchdog ")) << status_text.out;
}

}  // namespace
}  // namespace tb::e2e::congestion_e2e
