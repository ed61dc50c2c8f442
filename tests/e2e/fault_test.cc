// `testbedctl fault` on live labs: every fault kind is injected, seen in events.jsonl and in
// the traffic while it lasts, and reverted; bad input is exit 2 and changes nothing.
#include <chrono>
#include <fstream>
#include <functional>
#include <thread>

#include "core/process.h"
#include "e2e_util.h"

namespace tb::e2e {
namespace {

class Fault : public testing::Test {
 protected:
  void SetUp() override { TB_REQUIRE_ROOT(); }
  void up(const std::string& scenario_file, const std::string& prefix) {
    lab_ = unique_lab(prefix);
    guard_ = std::make_unique<LabGuard>(lab_);
    auto r = testbedctl("up " + scenario(scenario_file) + " --name " + lab_);
    ASSERT_EQ(r.rc, 0) << r.out;
  }
  // Starts `fault ...` in the background; returns the file its exit code lands in.
  std::string fault_bg(const std::string& args) {
    const std::string rcf = "/tmp/tb-e2e-fault-" + lab_ + "-" + std::to_string(n_++) + ".rc";
    std::filesystem::remove(rcf);
    sh("(" + tbctl() + " fault " + lab_ + " " + args + " > /dev/null 2>&1; echo $? > " + rcf +
       ") > /dev/null 2>&1 &");
    rc_files_.push_back(rcf);
    return rcf;
  }
  static int wait_rc(const std::string& rcf, int seconds = 20) {
    for (int i = 0; i < seconds * 10; ++i) {
      std::error_code ec;
      if (std::filesystem::file_size(rcf, ec) > 0 && !ec) {
        std::ifstream in(rcf);
        int rc = -1;
        in >> rc;
        return rc;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }
  // Ping from `node` to `target` (a hosts name); true when every echo came back.
  bool reaches(const std::string& node, const std::string& target) {
    return testbedctl("exec " + lab_ + " " + node + " -- ping -c 3 -i 0.1 -W 1 " + target).rc == 0;
  }
  double rtt_ms(const std::string& node, const std::string& target) {
    auto r = testbedctl("exec " + lab_ + " " + node + " -- ping -U -c 3 -i 0.1 -W 2 " + target);
    const auto p = r.out.find("rtt min/avg/max/mdev = ");
    if (p == std::string::npos) return -1;
    return std::stod(r.out.substr(r.out.find('/', p + 23) + 1));
  }
  std::vector<nlohmann::json> events(const std::string& event) {
    std::vector<nlohmann::json> out;
    std::ifstream in("/run/testbedctl/" + lab_ + "/events.jsonl");
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("event", "") == event) out.push_back(j);
    }
    return out;
  }
  void TearDown() override {
    for (const auto& f : rc_files_) std::filesystem::remove(f);
  }

  std::string lab_;
  std::unique_ptr<LabGuard> guard_;
  std::vector<std::string> rc_files_;
  int n_ = 0;
};

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

TEST_F(Fault, BlackholeDropsEverythingWhileTheLinkStaysUp) {
  up("mini.toml", "fb");
  ASSERT_TRUE(reaches("dc/s0/g0", "dc-s1-g0.rail"));
  const auto rcf = fault_bg("blackhole dc/s0/g0 dc/tor0 --for 2s");
  sleep_ms(500);
  EXPECT_FALSE(reaches("dc/s0/g0", "dc-s1-g0.rail"));
  auto link = sh("ip -n tb-" + lab_ + "-dc-s0-g0 -o link show rail");
  EXPECT_NE(link.out.find("state UP"), std::string::npos) << link.out;  // a gray failure
  EXPECT_EQ(wait_rc(rcf), 0);
  EXPECT_TRUE(reaches("dc/s0/g0", "dc-s1-g0.rail"));
  EXPECT_EQ(events("fault_inject").size(), 1u);
  EXPECT_EQ(events("fault_revert").size(), 1u);
  EXPECT_EQ(events("blackhole_on").size(), 1u);
  EXPECT_EQ(events("blackhole_off").size(), 1u);
}

TEST_F(Fault, LinkDownTakesTheLinkAndItsRoutesAndUpBringsThemBack) {
  up("mini.toml", "fd");
  const auto rcf = fault_bg("link-down dc/s1/g1 dc/tor0 --for 2s");
  sleep_ms(500);
  EXPECT_FALSE(reaches("dc/s0/g0", "dc-s1-g1.rail"));
  EXPECT_TRUE(reaches("dc/s0/g0", "dc-s1-g0.rail"));  // only that link
  EXPECT_EQ(wait_rc(rcf), 0);
  EXPECT_TRUE(reaches("dc/s0/g0", "dc-s1-g1.rail"));
  EXPECT_EQ(events("link_down").size(), 1u);
  EXPECT_EQ(events("link_up").size(), 1u);
}

TEST_F(Fault, FlapCyclesDownAndUp) {
  up("mini.toml", "ff");
  auto r = testbedctl("fault " + lab_ + " flap dc/s0/g0 dc/tor0 --period 400ms --count 3");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(events("link_down").size(), 3u);
  EXPECT_EQ(events("link_up").size(), 3u);
  auto inj = events("fault_inject");
  ASSERT_EQ(inj.size(), 3u);
  // Cycles start one period apart on the monotonic clock (within 100 ms).
  const double gap_ms =
      (inj[2]["t_mono_ns"].get<int64_t>() - inj[0]["t_mono_ns"].get<int64_t>()) / 1e6;
  EXPECT_NEAR(gap_ms, 800, 100);
  EXPECT_TRUE(reaches("dc/s0/g0", "dc-s1-g0.rail"));
}

TEST_F(Fault, LossAndLatencyChangeTheLinkAndGoBack) {
  up("mini.toml", "fl");
  const double base = rtt_ms("dc/s0/g0", "dc-s1-g0.rail");
  ASSERT_GT(base, 0);
  const auto rcf = fault_bg("latency dc/s0/g0 dc/tor0 --delay 20ms --for 2s");
  sleep_ms(600);
  EXPECT_NEAR(rtt_ms("dc/s0/g0", "dc-s1-g0.rail"), base + 40, 5);  // 20 ms each way
  EXPECT_EQ(wait_rc(rcf), 0);
  EXPECT_LT(rtt_ms("dc/s0/g0", "dc-s1-g0.rail"), base + 5);
  auto r = testbedctl("fault " + lab_ + " loss dc/s0/g0 dc/tor0 --loss 100% --for 1s");
  EXPECT_EQ(r.rc, 0) << r.out;
  auto sets = events("link_set");
  ASSERT_EQ(sets.size(), 4u);  // latency on, off; loss on, off
  EXPECT_EQ(sets[2]["loss_pct"].get<double>(), 100.0);
  EXPECT_EQ(sets[3]["loss_pct"].get<double>(), 0.0);
  EXPECT_TRUE(reaches("dc/s0/g0", "dc-s1-g0.rail"));
}

TEST_F(Fault, CrashTakesEveryLinkOfASwitch) {
  up("mini.toml", "fc");
  const auto rcf = fault_bg("crash dc/tor0 --for 2s");
  sleep_ms(500);
  EXPECT_FALSE(reaches("dc/s0/g0", "dc-s1-g0.rail"));
  EXPECT_TRUE(reaches("dc/s0/g0", "dc-s0-g1.nvl"));  // NVLink does not go through the ToR
  EXPECT_EQ(wait_rc(rcf), 0);
  EXPECT_EQ(events("link_down").size(), 4u);
  EXPECT_TRUE(reaches("dc/s0/g0", "dc-s1-g0.rail"));
}

TEST_F(Fault, KillStopsTheRankOnThatGpu) {
  up("mini.toml", "fk");
  char t[] = "/tmp/tb-e2e-fk-XXXXXX";
  const std::string results = mkdtemp(t);
  const std::string rcf = results + "/bench.rc";
  sh("(TESTBEDCTL_RESULTS_DIR=" + results + " " + tbctl() + " bench " + lab_ +
     " allreduce -b 64M -e 64M -n 100 -w 0 --timeout 10 > " + results + "/out 2>&1; echo $? > " +
     rcf + ") > /dev/null 2>&1 &");
  int ranks = 0;
  for (int i = 0; i < 100 && ranks < 4; ++i) {
    sleep_ms(100);
    ranks = 0;
    for (int pid : owned_processes("testbedctl lab=" + lab_)) {
      std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
      std::string name;
      comm >> name;
      ranks += name == "tb-rank";
    }
  }
  ASSERT_EQ(ranks, 4);
  sleep_ms(1000);
  auto r = testbedctl("fault " + lab_ + " kill dc/s1/g0");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(wait_rc(rcf, 30), 1);
  std::ifstream in(results + "/out");
  std::string out((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(out.find("rank 2 (dc/s1/g0): signal Killed"), std::string::npos) << out;
  auto killed = events("ranks_killed");
  ASSERT_EQ(killed.size(), 1u);
  EXPECT_EQ(killed[0]["pids"].size(), 1u);
  std::filesystem::remove_all(results);
}

TEST_F(Fault, PartitionCutsTheRegionsApart) {
  up("hz-bj.toml", "fp");
  ASSERT_TRUE(reaches("hz/s0/g0", "bj-s0-g0"));
  const auto rcf = fault_bg("partition hz bj --for 2s");
  sleep_ms(600);
  EXPECT_FALSE(reaches("hz/s0/g0", "bj-s0-g0"));  // neither Express Connect nor the VPN
  EXPECT_TRUE(reaches("hz/s0/g0", "hz-s1-g0"));
  EXPECT_EQ(wait_rc(rcf), 0);
  EXPECT_TRUE(reaches("hz/s0/g0", "bj-s0-g0"));
  EXPECT_EQ(events("blackhole_on").size(), 2u);
}

// Dual-ToR host-route withdrawal ([failover] host_routes = "withdraw", the default): a GPU's
// port going down on one ToR puts the GPU's /32 on every spine via the other ToR, so no spine
// hashes its traffic to the ToR that cannot deliver; the port coming back takes the /32 away.
TEST_F(Fault, DualTorLinkDownWithdrawsTheGpusHostRouteFromTheSpines) {
  up("hz-bj.toml", "fw");
  auto addr_of = [&](const std::string& netns, const std::string& ifname) {
    auto r = sh("ip -n " + netns + " -4 -o addr show " + ifname);
    const auto p = r.out.find("inet ");
    return p == std::string::npos ? std::string() : r.out.substr(p + 5, r.out.find('/', p) - p - 5);
  };
  const std::string gpu = addr_of("tb-" + lab_ + "-hz-s0-g0", "raila");
  const std::string tor0b = addr_of("tb-" + lab_ + "-hz-tor0b", "sp0");
  ASSERT_FALSE(gpu.empty());
  ASSERT_FALSE(tor0b.empty());
  auto host_route = [&](int spine) {
    return sh("ip -n tb-" + lab_ + "-hz-spine" + std::to_string(spine) + " route show " + gpu +
              "/32")
        .out;
  };
  auto wait_for = [&](const std::function<bool()>& done) {
    for (int i = 0; i < 40 && !done(); ++i) sleep_ms(50);
    return done();
  };
  EXPECT_EQ(host_route(0), "");
  EXPECT_NE(testbedctl("status " + lab_).out.find("fabric hz (running"), std::string::npos);

  auto r = testbedctl("link " + lab_ + " down hz/s0/g0:raila hz/tor0a:s0g0");
  ASSERT_EQ(r.rc, 0) << r.out;
  for (int k = 0; k < 2; ++k) {
    EXPECT_TRUE(wait_for([&] { return host_route(k).find("dev t0b") != std::string::npos; }))
        << "spine" << k << ": " << host_route(k);
    EXPECT_NE(host_route(k).find("via " + tor0b), std::string::npos) << host_route(k);
    EXPECT_EQ(host_route(k).find("t0a"), std::string::npos) << host_route(k);
  }
  // Every other GPU of rail 0 reaches it, whichever ToR and spine its flow hashes to.
  for (const char* from : {"hz/s1/g0", "hz/s2/g0", "hz/s3/g0"})
    EXPECT_TRUE(reaches(from, "hz-s0-g0.rail")) << from;
  auto w = events("fabric_withdraw");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0]["gpu"], "hz/s0/g0");
  EXPECT_EQ(w[0]["via"], nlohmann::json::array({"hz/tor0b"}));
  EXPECT_EQ(w[0]["withdrawn_from"], nlohmann::json::array({"hz/tor0a"}));

  r = testbedctl("link " + lab_ + " up hz/s0/g0:raila hz/tor0a:s0g0");
  ASSERT_EQ(r.rc, 0) << r.out;
  for (int k = 0; k < 2; ++k)
    EXPECT_TRUE(wait_for([&] { return host_route(k).empty(); })) << host_route(k);
  EXPECT_EQ(events("fabric_restore").size(), 1u);
  EXPECT_TRUE(reaches("hz/s1/g0", "hz-s0-g0.rail"));
}

TEST_F(Fault, BadInputIsExitTwo) {
  up("mini.toml", "fx");
  for (std::string args : {"nosuchkind dc/s0/g0 dc/tor0", "partition dc dc", "kill dc/s7/g0",
                           "loss dc/s0/g0 dc/tor0", "flap dc/s0/g0 dc/tor0",
                           "link-down dc/s0/g0 dc/s1/g1", "latency dc/s0/g0 dc/tor0 --delay x"}) {
    auto r = testbedctl("fault " + lab_ + " " + args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.out;
  }
  EXPECT_TRUE(events("fault_inject").empty());
}

}  // namespace
}  // namespace tb::e2e
