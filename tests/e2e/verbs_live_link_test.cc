// Verbs and keys that change a live lab and had no test: `link set --rate/--jitter/--loss`,
// `fault link-up`, Ctrl-C reverting a `fault ... --for`, `bench -d double|int64`,
// `resilient = true` from a scenario file, and [failover] `misses` / `bfd_multiplier` in the
// running daemons. Each reads the change back where it lives (tc, the delay stage's own stats,
// the nft loss rule's effect, the daemons' configs and state), so a change not made fails.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "live_util.h"

namespace tb::e2e {
namespace {

using nlohmann::json;

// The link's figures in force, as status reports them.
json emulated(const std::string& lab, const std::string& a, const std::string& b) {
  const json st = status_json(lab);
  for (const auto& l : st["links"])
    if (l["a"]["node"] == a && l["b"]["node"] == b) return l["emulated"];
  return {};
}

// The jitter (us) of every queue the delay stage in `netns` reports serving (its stats file,
// rewritten every 500 ms by tb-delayd itself).
std::vector<double> stage_jitters_us(const std::string& lab, const std::string& netns) {
  std::vector<double> out;
  auto j = json::parse(read_text("/run/testbedctl/" + lab + "/stages/" + netns + ".stats.json"),
                       nullptr, false);
  if (j.is_discarded()) return out;
  for (const auto& q : j["queues"]) out.push_back(q["jitter_us"].get<double>());
  return out;
}

TEST(LiveLink, SetRateJitterAndLossChangeTheLiveLinkAndGoBack) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("ls"));
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
  const std::string lab = g.lab(), link = " dc/s0/g0 dc/tor0";
  const std::string gpu = ns(lab, "dc-s0-g0"), tor = ns(lab, "dc-tor0");
  ASSERT_NE(qdiscs(gpu, "rail").find("rate 400Mbit"), std::string::npos) << qdiscs(gpu, "rail");

  // Rate: both directions' qdiscs replaced in the kernel.
  CmdResult r = testbedctl("link " + lab + " set" + link + " --rate 100mbit");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("rate 100Mbit"), std::string::npos) << r.out;
  EXPECT_NE(qdiscs(gpu, "rail").find("rate 100Mbit"), std::string::npos) << qdiscs(gpu, "rail");
  EXPECT_NE(qdiscs(tor, "s0g0").find("rate 100Mbit"), std::string::npos) << qdiscs(tor, "s0g0");
  EXPECT_EQ(emulated(lab, "dc/s0/g0", "dc/tor0")["rate_bps"], 100e6);

  // Jitter: the rail has no delay stage; one is made on demand at each receiving end, and the
  // running stage reports the jitter it applies. The rate set before stays.
  r = testbedctl("link " + lab + " set" + link + " --jitter 2ms");
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const auto& at : {tor, gpu})
    EXPECT_TRUE(wait_until([&] {
      for (double j : stage_jitters_us(lab, at))
        if (j == 2000) return true;
      return false;
    })) << at
        << ": " << read_text("/run/testbedctl/" + lab + "/stages/" + at + ".stats.json");
  EXPECT_EQ(emulated(lab, "dc/s0/g0", "dc/tor0")["jitter_ns"], 2'000'000);
  EXPECT_NE(qdiscs(gpu, "rail").find("rate 100Mbit"), std::string::npos) << qdiscs(gpu, "rail");
  EXPECT_TRUE(reaches(lab, "dc/s0/g0", "dc-s1-g0.rail"));

  // Loss: 100% drops every echo; 0 brings them back.
  r = testbedctl("link " + lab + " set" + link + " --loss 100%");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("loss 100%"), std::string::npos) << r.out;
  EXPECT_TRUE(unreachable(lab, "dc/s0/g0", "dc-s1-g0.rail"));
  EXPECT_TRUE(reaches(lab, "dc/s0/g1", "dc-s1-g0.rail"));  // only that link
  EXPECT_EQ(emulated(lab, "dc/s0/g0", "dc/tor0")["loss_pct"], 100.0);
  r = testbedctl("link " + lab + " set" + link + " --loss 0 --jitter 0 --rate 400mbit");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(reaches(lab, "dc/s0/g0", "dc-s1-g0.rail"));
  EXPECT_NE(qdiscs(gpu, "rail").find("rate 400Mbit"), std::string::npos) << qdiscs(gpu, "rail");
  EXPECT_TRUE(wait_until([&] {
    for (double j : stage_jitters_us(lab, tor))
      if (j != 0) return false;
    return true;
  })) << read_text("/run/testbedctl/" + lab + "/stages/" + tor + ".stats.json");
  // A figure that does not parse names its flag.
  r = testbedctl("link " + lab + " set" + link + " --jitter fast");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--jitter: \"fast\" is not a duration"), std::string::npos) << r.out;
}

bool carrier_up(const std::string& netns, const std::string& ifname) {
  return sh("ip -n " + netns + " -o link show " + ifname).out.find("state UP") != std::string::npos;
}

TEST(LiveLink, FaultLinkUpBringsBackALinkThatFaultOrLinkTookDown) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("fu"));
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
  const std::string lab = g.lab(), link = " dc/s1/g1 dc/tor0";
  const std::string gpu = ns(lab, "dc-s1-g1");
  // link-down without --for stays down after the verb returns...
  CmdResult r = testbedctl("fault " + lab + " link-down" + link);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE(carrier_up(gpu, "rail")) << "link-down without --for did not stay";
  EXPECT_TRUE(unreachable(lab, "dc/s0/g0", "dc-s1-g1.rail"));
  // ...until link-up, which also puts back the routes the kernel dropped.
  r = testbedctl("fault " + lab + " link-up" + link);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(carrier_up(gpu, "rail"));
  EXPECT_TRUE(reaches(lab, "dc/s0/g0", "dc-s1-g1.rail"));
  EXPECT_TRUE(reaches(lab, "dc/s1/g1", "dc-s0-g0.rail"));
  // The same after `link down`.
  ASSERT_EQ(testbedctl("link " + lab + " down" + link).rc, 0);
  EXPECT_TRUE(unreachable(lab, "dc/s0/g0", "dc-s1-g1.rail"));
  r = testbedctl("fault " + lab + " link-up" + link);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(reaches(lab, "dc/s0/g0", "dc-s1-g1.rail"));
  EXPECT_EQ(lab_events(lab, "link_up").size(), 2u);
}

TEST(LiveLink, CtrlCRevertsAFaultAtOnceAndExits) {
  TB_REQUIRE_ROOT();
  ScratchDir dir;
  LabGuard g(unique_lab("ci"));
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
  const std::string lab = g.lab();
  ASSERT_TRUE(reaches(lab, "dc/s0/g0", "dc-s1-g0.rail"));
  Child fault({"fault", lab, "blackhole", "dc/s0/g0", "dc/tor0", "--for", "30s"},
              dir.file("fault.log"));
  ASSERT_TRUE(wait_until([&] { return !lab_events(lab, "blackhole_on").empty(); }))
      << read_text(dir.file("fault.log"));
  EXPECT_TRUE(unreachable(lab, "dc/s0/g0", "dc-s1-g0.rail"));
  EXPECT_FALSE(fault.wait(0).has_value()) << "fault --for 30s ended early";
  ASSERT_EQ(::kill(fault.pid(), SIGINT), 0);
  const auto status = fault.wait(10);  // well before the 30 s
  ASSERT_TRUE(status.has_value()) << "fault did not exit on SIGINT";
  ASSERT_TRUE(WIFEXITED(*status)) << "killed by signal " << WTERMSIG(*status);
  EXPECT_EQ(WEXITSTATUS(*status), 0) << read_text(dir.file("fault.log"));
  EXPECT_NE(read_text(dir.file("fault.log")).find("interrupted: reverted what was in force"),
            std::string::npos)
      << read_text(dir.file("fault.log"));
  EXPECT_EQ(lab_events(lab, "fault_revert").size(), 1u);
  EXPECT_EQ(lab_events(lab, "blackhole_off").size(), 1u);
  EXPECT_TRUE(reaches(lab, "dc/s0/g0", "dc-s1-g0.rail"));
}

TEST(LiveLink, BenchRunsDoubleAndInt64Correctly) {
  TB_REQUIRE_ROOT();
  ScratchDir dir;
  LabGuard g(unique_lab("bd"));
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
  for (const std::string type : {"double", "int64"}) {
    SCOPED_TRACE(type);
    const std::string out = dir.file(type + ".json");
    CmdResult r =
        sh("TESTBEDCTL_RESULTS_DIR=" + dir.path.string() + " " + tbctl() + " bench " + g.lab() +
           " allreduce -b 8K -e 16K -f 2 -n 2 -w 1 -d " + type + " --json " + out);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
    const json j = json::parse(read_text(out), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_EQ(j.value("wrong", -1), 0);
    ASSERT_EQ(j["rows"].size(), 2u) << j.dump();
    for (const auto& row : j["rows"]) {
      EXPECT_EQ(row["type"], type);
      EXPECT_EQ(row["count"].get<int64_t>() * 8, row["size_bytes"].get<int64_t>()) << row.dump();
      EXPECT_EQ(row["wrong"], 0);
    }
  }
}

// The summary.json under `dir` (run writes <dir>/<lab>/run-<time>/summary.json).
json run_summary(const ScratchDir& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path))
    if (e.path().filename() == "summary.json")
      return json::parse(read_text(e.path().string()), nullptr, false);
  return {};
}

TEST(LiveLink, ResilientFromTheScenarioRestartsTheWorkloadAfterARankIsKilled) {
  TB_REQUIRE_ROOT();
  ScratchDir dir;
  LabGuard g(unique_lab("rs"));
  // mini's [[workload]] "ar" is the file's last table before this: resilient goes into it.
  const std::string file = scenario_named(
      dir, "mini.toml", g.lab(),
      "resilient = true\n\n[[fault]]\nat = \"2s\"\nkind = \"rank-kill\"\nnode = \"dc/s1/g0\"\n");
  CmdResult r = sh("TESTBEDCTL_RESULTS_DIR=" + dir.path.string() + " " + tbctl() + " run " + file +
                   " --timeout 5 --down");  // no --resilient: the file says it
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("resilient (the group restarts after a rank fails)"), std::string::npos)
      << r.out;
  const json s = run_summary(dir);
  ASSERT_FALSE(s.is_null()) << r.out;
  EXPECT_EQ(s["workload_restarts"], 1) << s.dump(1);
  EXPECT_TRUE(marked_netns(g.lab()).empty());
}

// hz-bj without its fault timeline and [expect], with `failover` as its [failover] table.
std::string hzbj_failover(const ScratchDir& dir, const std::string& lab,
                          const std::string& failover) {
  const std::string path = scenario_named(dir, "hz-bj.toml", lab);
  std::string named = read_text(path);
  named = named.substr(0, named.find("[[fault]]"));
  std::ofstream(path) << named << "[failover]\n" << failover;
  return path;
}

TEST(LiveLink, AgentMissesReachTheRunningAgents) {
  TB_REQUIRE_ROOT();
  ScratchDir dir;
  LabGuard g(unique_lab("am"));
  const std::string lab = g.lab();
  const std::string file =
      hzbj_failover(dir, lab, "mode = \"agent\"\nprobe_interval = \"10ms\"\nmisses = 7\n");
  CmdResult up = testbedctl("up " + file);
  ASSERT_EQ(up.rc, 0) << up.out;
  // Each transit router's agent runs with a config that says 7.
  int agents = 0;
  const json st = status_json(lab);
  for (const auto& d : st["backends"]["daemons"]) {
    if (!d["name"].get<std::string>().starts_with("agent ")) continue;
    ++agents;
    EXPECT_TRUE(d["running"].get<bool>()) << d.dump();
    std::string cmdline = read_text("/proc/" + std::to_string(d["pid"].get<int>()) + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    const auto at = cmdline.find("--config ");
    ASSERT_NE(at, std::string::npos) << cmdline;
    const std::string conf = cmdline.substr(at + 9, cmdline.find(' ', at + 9) - at - 9);
    const json c = json::parse(read_text(conf), nullptr, false);
    EXPECT_EQ(c.value("misses", 0), 7) << conf << ": " << c.dump();
    EXPECT_EQ(c.value("interval_ns", 0), 10'000'000) << c.dump();
  }
  EXPECT_EQ(agents, 2);
  // And acts on it: a path goes down only after 7 intervals unheard (the event says how many).
  CmdResult f = testbedctl("fault " + lab + " blackhole hz/tr bj/tr --link ec --for 1s");
  ASSERT_EQ(f.rc, 0) << f.out;
  ASSERT_TRUE(wait_until([&] { return lab_events(lab, "agent_path_down").size() >= 2; }));
  for (const auto& e : lab_events(lab, "agent_path_down"))
    EXPECT_GE(e["misses"].get<int>(), 7) << e.dump();
}

TEST(LiveLink, BfdMultiplierReachesTheRunningBfdDaemons) {
  TB_REQUIRE_ROOT();
  if (::access("/usr/lib/frr/bfdd", X_OK) != 0 || ::access("/usr/bin/vtysh", X_OK) != 0)
    GTEST_SKIP() << "frr not installed (scripts/setup --with frr)";
  ScratchDir dir;
  LabGuard g(unique_lab("bm"));
  const std::string lab = g.lab();
  const std::string file =
      hzbj_failover(dir, lab, "mode = \"bfd\"\nbfd_interval = \"70ms\"\nbfd_multiplier = 7\n");
  CmdResult up = testbedctl("up " + file);
  ASSERT_EQ(up.rc, 0) << up.out;
  for (const std::string router : {"hz-tr", "bj-tr"}) {
    SCOPED_TRACE(router);
    const std::string frr = "/run/testbedctl/" + lab + "/frr/" + ns(lab, router);
    const std::string conf = read_text(frr + "/bfdd.conf");
    EXPECT_NE(conf.find("detect-multiplier 7"), std::string::npos) << conf;
    EXPECT_NE(conf.find("receive-interval 70"), std::string::npos) << conf;
    // What bfdd itself runs with, asked over its vty socket: every session (one per WAN link)
    // up with the local multiplier and interval.
    std::string peers;
    const bool up_all = wait_until(
        [&] {
          peers = sh("vtysh --vty_socket " + frr + " -c 'show bfd peers'").out;
          return peers.find("Status: up") != std::string::npos &&
                 peers.find("Status: down") == std::string::npos;
        },
        30);
    EXPECT_TRUE(up_all) << peers;
    EXPECT_NE(peers.find("Detect-multiplier: 7"), std::string::npos) << peers;
    EXPECT_NE(peers.find("Receive interval: 70ms"), std::string::npos) << peers;
  }
}

}  // namespace
}  // namespace tb::e2e
