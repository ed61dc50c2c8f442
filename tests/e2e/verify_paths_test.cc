// `verify --paths` end to end on the shipped scenarios (issue 13: every path class of mini and
// hz-bj within the sum of its hops' tolerances, and hz-bj's two paths the issue names within its
// own bounds), `--under-load` (the load runs, the host's share
// is reported), and issue 22's verify items: a link changed by `link set` is judged against the
// figures in force with the scenario's beside them, and a lossy link's TCP transfer is checked
// against the configured loss. Lab names start with "vp" (e2e_util.h unique_lab: 8 characters).
//
// The delay figures depend on the delay stage meeting issue 13's targets (helper branch
// stagetime: calibration and busy-wait); on a stage without them the sub-millisecond paths fail
// by the +0.1-0.15 ms per traversal the issue measured.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "browser.h"
#include "core/process.h"
#include "plan/plan.h"

namespace tb::e2e {
namespace {

using json = nlohmann::json;

json verify_json(const std::string& args, int* rc) {
  CmdResult r = sh("(" + tbctl() + " verify " + args + " --json 2>/dev/null)");
  *rc = r.rc;
  return json::parse(r.out, nullptr, false);
}

// A path class the issue names with a bound of its own: the pair verify picks for it, the RTT
// the scenario configures along it, and |measured - (configured + base)| at most `bound_ms`.
struct NamedTarget {
  std::string cls, from, to;
  double configured_ms, bound_ms;
};

void expect_paths_pass(const std::string& file, const std::string& prefix,
                       const std::vector<std::string>& classes,
                       const std::vector<NamedTarget>& named = {}) {
  LabGuard g(unique_lab(prefix));
  ASSERT_EQ(testbedctl("up " + scenario(file) + " --name " + g.lab()).rc, 0);
  int rc = -1;
  const json j = verify_json(g.lab() + " --paths --quick", &rc);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["mode"], "paths");
  // A path that missed in every reading while the host stalled is NOT JUDGED (exit 2), with the
  // stall's evidence; never a FAIL.
  auto not_judged = [](const json& p) {
    return p["result"] == "not judged" && !p["stall"].get<std::string>().empty();
  };
  std::vector<std::string> got;
  for (const auto& p : j["paths"]) {
    got.push_back(p["class"]);
    if (not_judged(p)) continue;
    EXPECT_EQ(p["result"], "pass") << p.dump(1);
    EXPECT_FALSE(p["out"]["hops"].empty()) << p.dump(1);
    EXPECT_FALSE(p["back"]["hops"].empty()) << p.dump(1);
    EXPECT_FALSE(p["measured_rtt_ms"].is_null()) << p.dump(1);
  }
  EXPECT_EQ(got, classes);
  if (j["result"] == "not judged")
    EXPECT_EQ(rc, 2) << j.dump(1);
  else
    EXPECT_EQ(rc, 0) << j.dump(1);
  for (const auto& t : named) {
    bool seen = false;
    for (const auto& p : j["paths"]) {
      if (p["class"] != t.cls) continue;
      seen = true;
      if (not_judged(p)) continue;
      EXPECT_EQ(p["from"], t.from) << p.dump(1);
      EXPECT_EQ(p["to"], t.to) << p.dump(1);
      EXPECT_NEAR(p["configured_rtt_ms"].get<double>(), t.configured_ms, 1e-6) << p.dump(1);
      ASSERT_FALSE(p["error_ms"].is_null()) << p.dump(1);
      EXPECT_LE(std::abs(p["error_ms"].get<double>()), t.bound_ms)
          << t.cls << ": " << t.from << " -> " << t.to << "\n"
          << p.dump(1);
    }
    EXPECT_TRUE(seen) << t.cls;
  }
  // The text names every class and the verdict; --html draws each path against its band in a
  // real browser (report/html.cc), with the lab's topology.
  char t[] = "/tmp/tb-e2e-vpaths-XXXXXX";
  const std::string dir = ::mkdtemp(t);
  CmdResult text = sh("(" + tbctl() + " verify " + g.lab() + " --paths --quick --html " + dir +
                      "/paths.html 2>/dev/null)");
  for (const auto& c : classes) EXPECT_NE(text.out.find(c), std::string::npos) << c;
  if (text.rc == 2)
    EXPECT_NE(text.out.find("NOT JUDGED: 0 of"), std::string::npos) << text.out;
  else
    EXPECT_NE(text.out.find("PASS: 0 of"), std::string::npos) << text.out;
  if (have_chromium()) {
    const auto p = open_in_chromium(dir + "/paths.html", prefix + "-verify-paths.png");
    expect_drawn(p, 1);
    EXPECT_EQ(p.canvases.at(0).first, 3) << "band, expected, measured";
    EXPECT_GT(p.svg_nodes, 8);
  }
  std::filesystem::remove_all(dir);
}

TEST(VerifyPaths, MiniPasses) {
  TB_REQUIRE_ROOT();
  expect_paths_pass("mini.toml", "vpm",
                    {"gpu-gpu in a server", "gpu-gpu same rail", "server-server over the vpc",
                     "server -> transit router", "transit router -> server"});
}

TEST(VerifyPaths, HzBjPasses) {
  TB_REQUIRE_ROOT();
  expect_paths_pass(
      "hz-bj.toml", "vph",
      {"gpu-gpu in a server", "gpu-gpu same rail", "gpu-gpu across rails", "gpu-gpu across regions",
       "server-server over the vpc", "server -> transit router", "transit router -> server",
       "server-server across regions"},
      // Issue 13's two named targets, idle: the VPC path (2 hops of 250 us each way) within
      // 1.0 ms + base +- 0.2 ms, and hz/s0 -> bj/s0 (VPC, transit routers, Express Connect
      // 25 ms) within 52 ms + base +- 0.5 ms. verify's own tolerance for the second is the sum
      // of its hops' (0.96 ms), wider than the issue's, so it is checked here. docs/figures.md
      // "Figures": +0.06 and +0.10 to +0.18 ms measured.
      {{"server-server over the vpc", "hz/s0", "hz/s1", 1.0, 0.2},
       {"server-server across regions", "hz/s0", "bj/s0", 52.0, 0.5}});
}

// Under load the verdicts may fail (the error is reported, and whose it is); what must hold is
// that load ran on links no probe uses, and the host's share was measured.
TEST(VerifyPaths, UnderLoadReportsTheLoadAndTheHost) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("vpl"));
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
  int rc = -1;
  const json j = verify_json(g.lab() + " --paths --quick --under-load", &rc);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_TRUE(rc == 0 || rc == 1 || (rc == 2 && j["result"] == "not judged")) << rc;
  EXPECT_EQ(j["under_load"], true);
  ASSERT_TRUE(j.contains("load")) << j.dump(1);
  EXPECT_TRUE(j["load"]["errors"].empty()) << j.dump(1);
  int carried = 0;
  for (const auto& f : j["load"]["flows"])
    carried += f.get<std::string>().find("Mbit/s out of") != std::string::npos;
  EXPECT_GT(carried, 0) << j["load"].dump(1);
  ASSERT_TRUE(j.contains("host"));
  EXPECT_GE(j["host"]["cpu_busy"].get<double>(), 0);
  for (const auto& p : j["paths"]) {
    EXPECT_FALSE(p["measured_rtt_ms"].is_null()) << p.dump(1);
    if (p["result"] == "fail") {
      EXPECT_TRUE(p["cause"] == "host" || p["cause"] == "emulation");
    }
    if (p["result"] == "not judged") {
      EXPECT_EQ(p["cause"], "host") << p.dump(1);
    }
  }
  // Nothing of the load is left: no tb-probe of this lab's is still sending.
  for (int pid : owned_processes(plan::owner_marker(g.lab()))) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(cmd.find("goodput"), std::string::npos) << pid;
  }
}

// Issue 22: after `link set`, verify judges what is in force and shows the scenario beside it.
TEST(VerifyPaths, LinkSetIsJudgedInForce) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("vps"));
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
  ASSERT_EQ(testbedctl("link " + g.lab() + " set dc/s0/g0 dc/tor0 --rate 100mbit --delay 5ms").rc,
            0);
  int rc = -1;
  const json j = verify_json(g.lab() + " --quick --link dc/s0/g0 dc/tor0", &rc);
  ASSERT_FALSE(j.is_discarded());
  ASSERT_EQ(j["classes"].size(), 1u);
  const json& c = j["classes"][0];
  EXPECT_EQ(c["configured"]["rate_bps"], 100e6);
  EXPECT_EQ(c["configured"]["delay_ms"], 5);
  EXPECT_EQ(c["in_force_differs"], true);
  EXPECT_EQ(c["scenario"]["rate_bps"], 400e6);
  // Judged against 100 Mbit/s and 5 ms; a reading the host stalled through is not judged (exit 2).
  if (c["result"] != "not judged") {
    for (const auto& k : c["checks"])
      if (k["check"] == "rate" || k["check"] == "delay") {
        EXPECT_EQ(k["verdict"], "pass") << k.dump(1);
      }
    EXPECT_EQ(rc, 0) << c.dump(1);
  } else {
    EXPECT_EQ(rc, 2) << c.dump(1);
  }
  CmdResult text =
      sh("(" + tbctl() + " verify " + g.lab() + " --quick --link dc/s0/g0 dc/tor0 2>/dev/null)");
  EXPECT_NE(text.out.find("in force (link set): rate 100Mbit, delay 5ms; the scenario's: rate "
                          "400Mbit"),
            std::string::npos)
      << text.out;
  // So does `status` (every report shows the scenario's figures beside those in force).
  CmdResult status = testbedctl("status " + g.lab());
  EXPECT_NE(status.out.find("in force: rate 100Mbit, delay 5ms; the scenario's: rate 400Mbit"),
            std::string::npos)
      << status.out;
  // The paths through it take the figures in force too: the same-rail path now has 5 ms on its
  // first hop, both ways.
  const json p = verify_json(g.lab() + " --paths --quick", &rc);
  ASSERT_FALSE(p.is_discarded());
  for (const auto& x : p["paths"])
    if (x["class"] == "gpu-gpu same rail") {
      EXPECT_NEAR(x["configured_rtt_ms"].get<double>(), 10.0, 1e-9) << x.dump(1);
    }
}

// Issue 22: a TCP transfer over a lossy link retransmits about the configured share of its
// segments (the loss rule drops whole GSO super-packets; see verify/tolerance.h). `link` names
// the link; the loss rule of a routed far end sits at that end's ingress (PREROUTING).
void expect_tcp_loss_passes(const std::string& prefix, const std::string& a, const std::string& b) {
  LabGuard g(unique_lab(prefix));
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
  ASSERT_EQ(testbedctl("link " + g.lab() + " set " + a + " " + b + " --loss 2%").rc, 0);
  int rc = -1;
  const json j = verify_json(g.lab() + " --quick --link " + a + " " + b, &rc);
  ASSERT_FALSE(j.is_discarded());
  ASSERT_EQ(j["classes"].size(), 1u);
  bool seen = false;
  for (const auto& k : j["classes"][0]["checks"])
    if (k["check"] == "tcp-loss") {
      seen = true;
      EXPECT_EQ(k["verdict"], "pass") << k.dump(1);
      EXPECT_FALSE(k["achieved"].is_null()) << k.dump(1);
    }
  EXPECT_TRUE(seen) << j.dump(1);
  EXPECT_TRUE(j["classes"][0]["measurement"].contains("loss_transfer")) << j.dump(1);
}

TEST(VerifyPaths, TcpLossCheckOnALossyRail) {
  TB_REQUIRE_ROOT();
  expect_tcp_loss_passes("vpt", "dc/s0/g0", "dc/tor0");
}

// The far end of dc/s0 - dc/vpc is a bridge port. Its loss rule sits on that port in the VPC's
// namespace (nft bridge family), so a dropped segment is lost after it left the sender and TCP
// retransmits it. (On the sender's own egress, where it was before, a drop came back to TCP as
// a local error, EPERM, which it sent again without a retransmission: 0 of ~1700 segments
// retransmitted at 2%.)
TEST(VerifyPaths, TcpLossCheckOnALossyEgress) {
  TB_REQUIRE_ROOT();
  expect_tcp_loss_passes("vpe", "dc/s0", "dc/vpc");
}

}  // namespace
}  // namespace tb::e2e
