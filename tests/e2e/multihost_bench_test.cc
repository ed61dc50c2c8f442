// A bench whose ranks run on two emulated hosts (issue 19): every host runs the same `bench`,
// the first host with a selected rank coordinates over the underlay, the ranks meet through
// their relayed stores and talk over the VXLAN seam, and every row lands on the coordinator.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "e2e_util.h"
#include "emulated_hosts.h"

namespace tb::e2e {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
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
  }
  void TearDown() override {
    if (hosts_)
      for (size_t i = 0; i < hosts_->size(); ++i)
        hosts_->testbedctl(i, "down " + lab_ + " --host " + hosts_->name(i));
    hosts_.reset();
    if (!file_.empty()) std::filesystem::remove(file_);
  }

  // The same bench on both hosts at once (as srun starts it): {a's result, b's result}.
  std::pair<CmdResult, CmdResult> bench_both(const std::string& args_a, const std::string& args_b) {
    CmdResult rb;
    std::thread t([&] { rb = hosts_->testbedctl(1, "bench " + lab_ + " " + args_b); });
    CmdResult ra = hosts_->testbedctl(0, "bench " + lab_ + " " + args_a);
    t.join();
    return {ra, rb};
  }

  std::unique_ptr<EmulatedHosts> hosts_;
  std::string lab_ = unique_lab("mb");
  std::string file_;
};

// hz's GPUs on host a, bj's on host b, one allreduce over the WAN tunnel: the values are right
// on every rank, the rows are on a (with b's ranks' logs), b says where.
TEST_F(MultihostBench, AllreduceAcrossTheSeamIsCorrectAndGatheredOnTheCoordinator) {
  const std::string args =
      "allreduce -b 64K -e 256K -n 3 -w 1 -c 1 --ranks hz/s0/g0,hz/s0/g1,bj/s0/g0,bj/s0/g1 "
      "--json /tmp/" +
      lab_ + "-bench.json";
  auto [a, b] = bench_both(args, args);
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
  // b's ranks' logs and rows were gathered into a's results directory; b kept its own copies.
  const std::string dir = bj["results_dir"];
  EXPECT_EQ(
      hosts_->run(0, "test -s " + dir + "/rank2.jsonl && test -e " + dir + "/logs/rank3.log").rc,
      0);
  EXPECT_EQ(hosts_->run(1, "test -s " + dir + "/rank2.jsonl").rc, 0);
  EXPECT_NE(hosts_->run(1, "test -e " + dir + "/bench.json").rc, 0);
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

// verify on each host measures the classes it holds whole, and names those it cannot: the WAN
// classes cross the seam (verify across hosts is not done yet); --link on a tunnel is exit 2.
TEST_F(MultihostBench, VerifyOnEachHostMeasuresItsOwnClassesAndNamesTheRest) {
  for (size_t h = 0; h < 2; ++h) {
    CmdResult v = hosts_->testbedctl(h, "verify " + lab_ + " --quick --json");
    auto j = nlohmann::json::parse(v.out.substr(std::min(v.out.find('{'), v.out.size())), nullptr,
                                   false);
    ASSERT_TRUE(j.is_object()) << v.out;
    EXPECT_NE(j["result"], "fail") << v.out;
    EXPECT_EQ(j["lab_host"], hosts_->name(h));
    EXPECT_GT(j["classes"].size(), 0u) << v.out;
    bool wan_named = false;
    for (const auto& n : j["not_here"])
      wan_named = wan_named || contains(n.get<std::string>(), "crosses hosts a and b");
    EXPECT_TRUE(wan_named) << j["not_here"].dump();
  }
  CmdResult paths = hosts_->testbedctl(0, "verify " + lab_ + " --paths");
  EXPECT_EQ(paths.rc, 2) << paths.out;
  EXPECT_TRUE(contains(paths.out, "spread over several hosts")) << paths.out;
  CmdResult tunnel = hosts_->testbedctl(0, "verify " + lab_ + " --link hz/tr:ec bj/tr");
  EXPECT_EQ(tunnel.rc, 2) << tunnel.out;
  EXPECT_TRUE(contains(tunnel.out, "crosses hosts a and b")) << tunnel.out;
}

}  // namespace
}  // namespace tb::e2e
