// A bench whose ranks run on two emulated hosts (issue 19): every host runs the same `bench`,
// the first host with a selected rank coordinates over the underlay, the ranks meet through
// their relayed stores and talk over the VXLAN seam, and every row lands on the coordinator.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include "e2e_util.h"
#include "emulated_hosts.h"

namespace tb::e2e {
namespace {

// Host h's verify probes still running: tb-probe serve/rtt/goodput (the lab's own tb-probe
// daemons, its failover agents, are not verify's), as "pid cmdline".
std::vector<std::string> probes_left(const EmulatedHosts& hosts, size_t h) {
  std::vector<std::string> out;
  for (const auto& p : hosts.processes(h)) {
    if (!contains(p, "tb-probe")) continue;
    std::ifstream in("/proc/" + p.substr(0, p.find(' ')) + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ranges::replace(cmd, '\0', ' ');
    for (const char* mode : {" serve ", " rtt ", " goodput "})
      if (contains(cmd, mode)) out.push_back(p + ": " + cmd);
  }
  return out;
}

class MultihostBench : public testing::Test {
 protected:
  void SetUp() override {
    if (!is_root()) GTEST_SKIP() << "needs root";
    hosts_ = std::make_unique<EmulatedHosts>("q", std::vector<std::string>{"a", "b"});
    ASSERT_TRUE(hosts_->ok()) << hosts_->error();
    file_ = hzbj_over_hosts(lab_, "/tmp/" + lab_ + "-multihost.toml",
                            {{{"a", hosts_->underlay(0), "regions = [\"hz\"]"},
                              {"b", hosts_->underlay(1), "regions = [\"bj\"]"}}});
    for (size_t i = 0; i < 2; ++i) {
      CmdResult u = hosts_->testbedctl(i, "up " + file_ + " --host " + hosts_->name(i));
      ASSERT_EQ(u.rc, 0) << u.out;
    }
    // Every test starts on a converged lab: hz and bj reach each other over Express Connect.
    std::string last;
    ASSERT_TRUE(wait_converged(*hosts_, 0, lab_, "hz/s0/g0", "bj-s0-g0", 56, &last)) << last;
  }
  void TearDown() override {
    if (hosts_)
      for (size_t i = 0; i < hosts_->size(); ++i)
        hosts_->testbedctl(i, "down " + lab_ + " --host " + hosts_->name(i));
    hosts_.reset();
    if (!file_.empty()) std::filesystem::remove(file_);
  }

  // The same bench on both hosts at once (as srun starts it): {a's result, b's result}. `env_b`:
  // variables for b's testbedctl ("NAME=value ").
  std::pair<CmdResult, CmdResult> bench_both(const std::string& args_a, const std::string& args_b,
                                             const std::string& env_b = "") {
    CmdResult rb;
    std::thread t([&] { rb = hosts_->run(1, env_b + tbctl() + " bench " + lab_ + " " + args_b); });
    CmdResult ra = hosts_->testbedctl(0, "bench " + lab_ + " " + args_a);
    t.join();
    return {ra, rb};
  }

  std::unique_ptr<EmulatedHosts> hosts_;
  std::string lab_ = unique_lab("mb");
  CmdResult ra_;
  std::string file_;
};

// hz's GPUs on host a, bj's on host b, one allreduce over the WAN tunnel: the values are right
// on every rank, the rows are on a (with b's ranks' logs), b says where. b keeps its results
// under a root of its own (TESTBEDCTL_RESULTS_DIR, as another machine's or another user's
// would differ): its copy of the run is there, under a's run id — never at a's absolute path.
TEST_F(MultihostBench, AllreduceAcrossTheSeamIsCorrectAndGatheredOnTheCoordinator) {
  const std::string args =
      "allreduce -b 64K -e 256K -n 3 -w 1 -c 1 --ranks hz/s0/g0,hz/s0/g1,bj/s0/g0,bj/s0/g1 "
      "--json /tmp/" +
      lab_ + "-bench.json";
  const std::string b_root = "/var/lib/testbedctl/results-of-b";
  auto [a, b] = bench_both(args, args, "TESTBEDCTL_RESULTS_DIR=" + b_root + " ");
  ASSERT_EQ(a.rc, 0) << a.out << "\n--- host b:\n" << b.out;
  EXPECT_EQ(b.rc, 0) << b.out;
  EXPECT_TRUE(contains(a.out, "ranks on hosts a (2), b (2)")) << a.out;
  EXPECT_TRUE(contains(b.out, "host b runs 2 of 4 ranks")) << b.out;
  EXPECT_TRUE(contains(b.out, "done; rows, bench.json and every rank's log are on host a"))
      << b.out;
  // The JSON twin on a: three sizes, nothing wrong, the hosts said.
  CmdResult j = hosts_->run(0, "cat /tmp/" + lab_ + "-bench.json");
  std::filesystem::remove("/tmp/" + lab_ + "-bench.json");
  auto bj = nlohmann::json::parse(j.out, nullptr, false);
  ASSERT_TRUE(bj.is_object()) << j.out;
  EXPECT_EQ(bj["hosts"], "a (2), b (2)");
  ASSERT_EQ(bj["rows"].size(), 3u) << j.out;
  EXPECT_EQ(bj["wrong"], 0) << j.out;
  EXPECT_EQ(bj["errors"].size(), 0u) << j.out;
  EXPECT_TRUE(bj["ok"].get<bool>()) << j.out;
  // b's ranks' logs and rows were gathered into a's results directory; b kept its own copies
  // under its own root, and made nothing at a's path.
  const std::string dir = bj["results_dir"];
  EXPECT_EQ(
      hosts_->run(0, "test -s " + dir + "/rank2.jsonl && test -e " + dir + "/logs/rank3.log").rc,
      0);
  const std::string run_id = dir.substr(dir.rfind('/') + 1);
  const std::string b_dir = b_root + "/" + lab_ + "/" + run_id;
  EXPECT_EQ(hosts_->run(1, "test -s " + b_dir + "/rank2.jsonl").rc, 0) << b.out;
  EXPECT_TRUE(contains(b.out, "this host's copy in " + b_dir)) << b.out;
  EXPECT_NE(hosts_->run(1, "test -e " + dir).rc, 0) << b.out;
  EXPECT_NE(hosts_->run(1, "test -e " + b_dir + "/bench.json").rc, 0);
  // No rank is left running on either host.
  for (size_t h = 0; h < 2; ++h)
    for (const auto& p : hosts_->processes(h)) EXPECT_FALSE(contains(p, "tb-rank")) << p;
}

// Hosts asked for different benches: exit 2 on both, naming the flags; a host none of whose
// GPUs is selected has nothing to do.
TEST_F(MultihostBench, DifferentFlagsAreExit2AndAHostWithoutRanksHasNothingToDo) {
  const std::string ranks = " --ranks hz/s0/g0,bj/s0/g0";
  auto [a, b] = bench_both("allreduce -b 8K -e 8K" + ranks, "allreduce -b 8K -e 16K" + ranks);
  EXPECT_EQ(a.rc, 2) << a.out;
  EXPECT_EQ(b.rc, 2) << b.out;
  EXPECT_TRUE(contains(a.out, "give every host the same flags")) << a.out;
  EXPECT_TRUE(contains(b.out, "refused this host")) << b.out;
  CmdResult idle = hosts_->testbedctl(1, "bench " + lab_ + " allreduce -b 8K -e 8K --ranks hz/s0");
  EXPECT_EQ(idle.rc, 0) << idle.out;
  EXPECT_TRUE(contains(idle.out, "host b holds none of the selected ranks")) << idle.out;
}

// Gloo's own FileStore layout (a directory per prefix, its temporaries hidden) goes through the
// same relay: an allgather over Gloo across the seam is correct.
TEST_F(MultihostBench, GlooAcrossTheSeamMeetsThroughTheRelayedStore) {
  const std::string args =
      "allgather --impl gloo -b 64K -e 64K -n 2 -w 1 -c 1 "
      "--ranks hz/s0/g0,hz/s1/g0,bj/s0/g0,bj/s1/g0";
  auto [a, b] = bench_both(args, args);
  EXPECT_EQ(a.rc, 0) << a.out << "\n--- host b:\n" << b.out;
  EXPECT_EQ(b.rc, 0) << b.out;
  EXPECT_TRUE(contains(a.out, "Out of bounds values : 0 OK")) << a.out;
}

// `launch` across hosts: each host starts its own ranks with torchrun's environment; rank 1 on b
// reaches MASTER_ADDR (rank 0 on a) across the seam; b's lines come out of a, prefixed.
TEST_F(MultihostBench, LaunchRunsEachHostsRanksAndGathersTheirLines) {
  const std::string cmd =
      "launch " + lab_ +
      " --ranks hz/s0/g0,bj/s0/g0 --timeout 60s -- sh -c "
      "'echo rank=$RANK world=$WORLD_SIZE; ping -c1 -W5 $MASTER_ADDR >/dev/null && echo reached'";
  CmdResult rb;
  std::thread t([&] { rb = hosts_->testbedctl(1, cmd); });
  CmdResult ra = hosts_->testbedctl(0, cmd);
  t.join();
  ASSERT_EQ(ra.rc, 0) << ra.out << "\n--- host b:\n" << rb.out;
  EXPECT_EQ(rb.rc, 0) << rb.out;
  EXPECT_TRUE(contains(ra.out, "rank=0 world=2")) << ra.out;
  EXPECT_TRUE(contains(ra.out, "rank=1 world=2")) << ra.out;  // b's rank, relayed
  EXPECT_TRUE(std::regex_search(ra.out, std::regex("rank 1[^\n]*\\] reached"))) << ra.out;
  EXPECT_TRUE(contains(ra.out, "ranks on hosts a (1), b (1)")) << ra.out;
  EXPECT_TRUE(contains(rb.out, "done; the whole job's verdict")) << rb.out;

  // A rank that fails on b ends the job on a too (torchrun's rule), both exit 1.
  const std::string failing = "launch " + lab_ +
                              " --ranks hz/s0/g0,bj/s0/g0 --grace 2s --timeout 60s -- sh -c "
                              "'if [ $RANK = 1 ]; then exit 3; fi; sleep 50'";
  std::thread t2([&] { rb = hosts_->testbedctl(1, failing); });
  ra = hosts_->testbedctl(0, failing);
  t2.join();
  EXPECT_EQ(ra.rc, 1) << ra.out;
  EXPECT_EQ(rb.rc, 1) << rb.out;
  EXPECT_TRUE(contains(ra.out, "rank 1 (bj/s0/g0) exit 3")) << ra.out;
  for (size_t h = 0; h < 2; ++h)
    for (const auto& p : hosts_->processes(h)) EXPECT_FALSE(contains(p, "sleep")) << p;
}

// A host that stops answering mid-job (its underlay cut, as a machine powered off) is noticed
// within seconds by the keepalive of the session's connection (multihost/wire.h kSilentMs),
// not after the job's own limits: a launch whose ranks would sleep 60 s ends on a with exit 1
// naming host b well within 30 s of the cut; b, cut off from a, ends its own ranks too.
TEST_F(MultihostBench, AHostWhoseUnderlayIsCutIsNoticedWithinSeconds) {
  const std::string cmd = "launch " + lab_ +
                          " --ranks hz/s0/g0,bj/s0/g0 --grace 2s --timeout 120s -- sh -c "
                          "'echo started; exec sleep 60'";
  CmdResult rb;
  std::thread t([&] { rb = hosts_->testbedctl(1, cmd); });
  std::chrono::steady_clock::time_point cut{}, a_done{};
  std::thread ta([&] {
    ra_ = hosts_->testbedctl(0, cmd);
    a_done = std::chrono::steady_clock::now();
  });
  // Both hosts' ranks said they started (their logs, each on its own host): then cut b off the
  // underlay.
  const std::string logs = "/var/lib/testbedctl/results/" + lab_ + "/launch-*/logs/";
  bool started = false;
  for (int i = 0; i < 300 && !started; ++i) {
    started = hosts_->run(0, "grep -qs started " + logs + "rank0.log").rc == 0 &&
              hosts_->run(1, "grep -qs started " + logs + "rank1.log").rc == 0;
    if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(started);
  cut = std::chrono::steady_clock::now();
  CmdResult down = hosts_->run(1, "ip link set ul0 down");
  EXPECT_EQ(down.rc, 0) << down.out;
  ta.join();
  t.join();
  EXPECT_EQ(hosts_->run(1, "ip link set ul0 up").rc, 0);
  const double noticed_s = std::chrono::duration<double>(a_done - cut).count();
  EXPECT_EQ(ra_.rc, 1) << ra_.out << "\n--- host b:\n" << rb.out;
  EXPECT_LT(noticed_s, 30) << ra_.out;
  EXPECT_TRUE(contains(ra_.out, "host b")) << ra_.out;
  EXPECT_TRUE(contains(ra_.out, "no answer from it")) << ra_.out;
  EXPECT_EQ(rb.rc, 1) << rb.out;
  EXPECT_TRUE(contains(rb.out, "host a went away")) << rb.out;
  std::cout << "host b cut off: host a's launch ended " << noticed_s << " s later\n";
}

// verify over both hosts at once (as srun starts it): a coordinates, every class is measured —
// those wholly on b by b, the WAN classes from hz's router on a to bj's on b across the tunnel,
// b serving its end — and the one report is a's; b exits with a's verdict. The same for --link
// on the tunnel. A loaded host's misses are NOT JUDGED (exit 2), never a pass: the stall guard
// (verify/result.h) decides, so only a failure is asserted against.
TEST_F(MultihostBench, VerifyOnBothHostsMeasuresEveryClassTheWanAcrossTheTunnel) {
  auto both = [&](const std::string& args) {
    CmdResult rb;
    std::thread t([&] { rb = hosts_->testbedctl(1, "verify " + lab_ + " " + args); });
    CmdResult ra = hosts_->testbedctl(0, "verify " + lab_ + " " + args);
    t.join();
    return std::pair{ra, rb};
  };
  auto json_of = [](const std::string& out) {
    return nlohmann::json::parse(out.substr(std::min(out.find('{'), out.size())), nullptr, false);
  };
  auto [a, b] = both("--quick --json");
  auto j = json_of(a.out);
  ASSERT_TRUE(j.is_object()) << a.out << "\n--- host b:\n" << b.out;
  std::cout << verify_digest(j);
  EXPECT_NE(a.rc, 1) << verify_digest(j) << "--- host b:\n"
                     << b.out.substr(0, 2000) << "\n"
                     << a.out;
  EXPECT_EQ(b.rc, a.rc) << b.out;  // the coordinator's verdict
  EXPECT_TRUE(contains(b.out, "the report is on host a")) << b.out;
  EXPECT_EQ(j["lab_host"], "a");
  EXPECT_EQ(j["hosts"], nlohmann::json::array({"a", "b"}));
  EXPECT_FALSE(j.contains("not_here"));
  int wan = 0, on_b = 0;
  for (const auto& c : j["classes"]) {
    EXPECT_NE(c["result"], "fail") << c.dump();
    EXPECT_TRUE(c["measurement"]["errors"].empty()) << c.dump();
    on_b += c["measured_on"] == "b";
    if (c["tier"] != "wan") continue;
    ++wan;
    EXPECT_EQ(c["measured_on"], "a") << c.dump();
    EXPECT_EQ(c["served_on"], "b") << c.dump();
    EXPECT_EQ(c["link"]["a"]["node"].get<std::string>().substr(0, 3), "hz/") << c.dump();
    EXPECT_TRUE(c["measurement"].contains("rtt")) << c.dump();
    EXPECT_TRUE(c["measurement"].contains("goodput")) << c.dump();
  }
  EXPECT_EQ(wan, 2) << j["classes"].dump();  // express connect and the VPN, both tunnels
  EXPECT_EQ(j["classes"].size(), 8u);
  EXPECT_EQ(on_b, 1);  // bj's aggregation class (bj/tor0 - bj/spine0): hz has no such link
  for (size_t h = 0; h < 2; ++h) EXPECT_EQ(probes_left(*hosts_, h), std::vector<std::string>{});

  auto [la, lb] = both("--quick --json --link hz/tr:ec bj/tr");
  auto lj = json_of(la.out);
  ASSERT_TRUE(lj.is_object()) << la.out << "\n--- host b:\n" << lb.out;
  EXPECT_NE(la.rc, 1) << verify_digest(lj) << la.out;
  EXPECT_EQ(lb.rc, la.rc) << lb.out;
  ASSERT_EQ(lj["classes"].size(), 1u);
  EXPECT_EQ(lj["classes"][0]["served_on"], "b");
  EXPECT_NE(lj["classes"][0]["result"], "fail") << lj.dump();
}

// Different flags: exit 2 on both, naming why; --paths across hosts is not done (exit 2 saying
// so); --link on a link wholly on b leaves a nothing to do.
TEST_F(MultihostBench, VerifyWithDifferentFlagsIsExit2OnBoth) {
  CmdResult rb;
  std::thread t([&] { rb = hosts_->testbedctl(1, "verify " + lab_ + " --link hz/tr:ec bj/tr"); });
  CmdResult ra = hosts_->testbedctl(0, "verify " + lab_ + " --quick --link hz/tr:ec bj/tr");
  t.join();
  EXPECT_EQ(ra.rc, 2) << ra.out;
  EXPECT_EQ(rb.rc, 2) << rb.out;
  EXPECT_TRUE(contains(ra.out, "give every host the same flags")) << ra.out;
  EXPECT_TRUE(contains(rb.out, "refused this host")) << rb.out;
  CmdResult paths = hosts_->testbedctl(0, "verify " + lab_ + " --paths");
  EXPECT_EQ(paths.rc, 2) << paths.out;
  EXPECT_TRUE(contains(paths.out, "whole paths across hosts are not measured yet")) << paths.out;
  CmdResult idle = hosts_->testbedctl(0, "verify " + lab_ + " --quick --link bj/s0/g0 bj/tor0");
  EXPECT_EQ(idle.rc, 0) << idle.out;
  EXPECT_TRUE(contains(idle.out, "nothing to do here")) << idle.out;
  for (size_t h = 0; h < 2; ++h) EXPECT_EQ(probes_left(*hosts_, h), std::vector<std::string>{});
}

}  // namespace
}  // namespace tb::e2e
