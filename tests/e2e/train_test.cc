// train on a live mini lab (2 servers x 2 GPUs): training steps complete with correct reduced
// gradients over TCP, the sweep reports one row per server count with its bytes on the intended
// tiers, tensor parallelism inside a server and the frontend between servers, the guard flags a
// run made CPU-bound on purpose (a busy loop on every CPU), and bad input is exit 2 before any
// rank starts. Then labs of their own: ECMP (scenarios/ecmp.toml: L4 hashing, many flows over
// several uplinks) and hz-bj (16 GPUs). Every bound below is a bound on a hang, not a timing claim;
// no figure is checked.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "e2e_util.h"

namespace tb::e2e {
namespace {

class Train : public SharedMiniLab<Train> {
 protected:
  static void SetUpTestSuite() { up_shared("trn", "train"); }
  static CmdResult train(const std::string& args) {
    return sh("TESTBEDCTL_RESULTS_DIR=" + results_ + " timeout 300 " + tbctl() + " train " + lab_ +
              " " + args);
  }
  static nlohmann::json read_json(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in, nullptr, false);
  }
};

// A small model: 2 layers, buckets small enough that several overlap the backward pass.
const std::string kSmallModel =
    " --params 200000 --grad-bytes 4 --layers 2 --bucket 128K --activation-bytes 16K"
    " --compute 20ms --compute-scale 1";
const std::string kSmall = kSmallModel + " --steps 3 --warmup 1";

TEST_F(Train, SweepReportsOneRowPerServerCountWithCorrectGradients) {
  const std::string json = results_ + "/sweep.json";
  auto r = train(std::string("--servers 1,2") + kSmall + " --json " + json);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("compute: 20.000 ms per micro-batch per GPU (real) x [scale] compute 1"),
            std::string::npos)
      << r.out;
  const auto j = read_json(json);
  ASSERT_TRUE(j.is_array()) << r.out;
  ASSERT_EQ(j.size(), 1u);  // mini has no training workload: the defaults and the flags, once
  const auto& rows = j[0]["rows"];
  ASSERT_EQ(rows.size(), 2u) << j.dump(1);
  EXPECT_EQ(rows[0]["servers"], 1);
  EXPECT_EQ(rows[0]["ranks"], 2);
  EXPECT_EQ(rows[1]["servers"], 2);
  EXPECT_EQ(rows[1]["ranks"], 4);
  for (const auto& row : rows) {
    EXPECT_EQ(row["wrong"], 0) << row.dump();
    EXPECT_EQ(row["steps"], 3) << row.dump();
    EXPECT_TRUE(row["errors"].empty()) << row.dump();
    EXPECT_GE(row["step_ms"].get<double>(), row["compute_ms"].get<double>()) << row.dump();
  }
  // One server: the data-parallel ring stays on NVLink; two: it crosses the rail.
  EXPECT_TRUE(rows[0]["bytes_per_step"].contains("nvl")) << rows[0].dump();
  EXPECT_FALSE(rows[0]["bytes_per_step"].contains("rail")) << rows[0].dump();
  EXPECT_TRUE(rows[1]["bytes_per_step"].contains("rail")) << rows[1].dump();
  EXPECT_DOUBLE_EQ(rows[0]["efficiency"].get<double>(), 1.0);
  EXPECT_TRUE(rows[1]["efficiency"].is_number());
  // Each row's ranks wrote their steps, and the lab's JSON sits in the last row's directory.
  EXPECT_TRUE(std::filesystem::exists(rows[1]["results_dir"].get<std::string>() + "/train.json"));
}

TEST_F(Train, TensorParallelInsideAServerAndTheFrontendBetweenServers) {
  const std::string json = results_ + "/tp.json";
  auto r = train(std::string("--servers 2 --tp 2 --tier frontend") + kSmall + " --json " + json);
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = read_json(json);
  ASSERT_TRUE(j.is_array()) << r.out;
  const auto& row = j[0]["rows"][0];
  EXPECT_EQ(row["tp"], 2);
  EXPECT_EQ(row["dp"], 2);
  EXPECT_EQ(row["wrong"], 0) << row.dump();
  EXPECT_TRUE(row["bytes_per_step"].contains("nvl")) << row.dump();       // tensor parallel
  EXPECT_TRUE(row["bytes_per_step"].contains("frontend")) << row.dump();  // data parallel
  EXPECT_FALSE(row["bytes_per_step"].contains("rail")) << row.dump();
  EXPECT_GT(row["tp_ms"].get<double>(), 0) << row.dump();
  EXPECT_EQ(j[0]["tier"], "frontend");
}

// Two busy loops per CPU, each bounded (timeout 120), killed by pid when the test ends.
// Two, not one: beside scripts/test's idle cgroup (the lab VM, cpu.idle = 1) one loop per CPU
// left that group 9-16% of a 0.2-0.4 s window in 3 of 14 runs here, and CI's run on 4185962 saw
// 16% (busy 0.84, not flagged); with two per CPU, 0-0.9% in 20 runs and 8.4% in 1 of 12 more
// beside the same VM (2026-12-06, docs/development.md). Why a lone loop per CPU leaves the group
// turns was not established; the figures are what holds. The run below is also longer (see there).
class CpuHogs {
 public:
  CpuHogs() {
    const long n = 2 * ::sysconf(_SC_NPROCESSORS_ONLN);
    for (long i = 0; i < n; ++i) {
      const pid_t p = ::fork();
      if (p == 0) {
        ::execl("/usr/bin/timeout", "timeout", "120", "/bin/sh", "-c", "while :; do :; done",
                static_cast<char*>(nullptr));
        ::_exit(127);
      }
      if (p > 0) pids_.push_back(p);
    }
  }
  ~CpuHogs() {
    for (pid_t p : pids_) ::kill(p, SIGTERM);
    for (pid_t p : pids_) ::waitpid(p, nullptr, 0);
  }

 private:
  std::vector<pid_t> pids_;
};

TEST_F(Train, TheGuardFlagsACpuBoundRun) {
  const std::string json = results_ + "/hog.json";
  CmdResult r;
  {
    CpuHogs hogs;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let them reach every CPU
    // The same model with 25 steps: the guard's window ~1.5 s rather than ~0.2 s, whose 40
    // ticks of /proc/stat read 3% short of the busy loops' 100% in one run here.
    r = train("--servers 2" + kSmallModel + " --steps 25 --warmup 1 --json " + json);
  }
  ASSERT_EQ(r.rc, 0) << r.out;  // the steps are right; the figure is the host's, and says so
  const auto j = read_json(json);
  ASSERT_TRUE(j.is_array()) << r.out;
  const auto& row = j[0]["rows"][0];
  EXPECT_TRUE(row["host_bound"].get<bool>()) << row.dump();
  EXPECT_GE(row["host"]["cpu_busy"].get<double>(), 0.9) << row.dump();
  // The link check ran over the same window (its verdict is the hogs' to decide, not checked).
  EXPECT_TRUE(row["host"]["links_checked"].get<bool>()) << row.dump();
  EXPECT_TRUE(row["host"]["links_short"].is_array()) << row.dump();
  EXPECT_NE(r.out.find("HOST-BOUND, not the network's figure: CPUs"), std::string::npos) << r.out;
}

TEST_F(Train, BadInputIsExit2BeforeAnyRankStarts) {
  auto r = train("--servers 1,3");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--servers: 3 is not 1..2"), std::string::npos) << r.out;
  r = train("--tp 3");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("do not divide into tp = 3"), std::string::npos) << r.out;
  r = train("--servers 2,1");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("must increase"), std::string::npos) << r.out;
}

// ECMP (scenarios/ecmp.toml): each ToR's route to the other rail has a next hop per spine and
// the ToRs hash with the 5-tuple; with 8 connections per ring peer (a 4 MB bucket over 8 ranks:
// 512 KiB chunks, 8 stripes of 64 KiB, so 32 flows out of each ToR over its 4 uplinks) the
// interface counters show more than one uplink of each ToR carrying the bytes, and the steps stay
// correct. Behaviour only: which uplinks, and how evenly, is the hash's and not checked.
TEST(TrainEcmp, MultipathRoutesHashOnPortsAndManyFlowsUseSeveralUplinks) {
  TB_REQUIRE_ROOT();
  std::string dir = "/tmp/tb-e2e-ecmp-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string lab = unique_lab("ec");
  LabGuard guard(lab);
  auto r = testbedctl("up " + scenario("ecmp.toml") + " --name " + lab);
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string tor1 = "tb-" + lab + "-dc-tor1";
  r = sh("ip -n " + tor1 + " -4 route show");
  ASSERT_EQ(r.rc, 0) << r.out;
  int nexthops = 0;
  for (size_t at = r.out.find("nexthop via"); at != std::string::npos;
       at = r.out.find("nexthop via", at + 1))
    ++nexthops;
  EXPECT_EQ(nexthops, 4) << r.out;
  for (const char* dev : {"dev sp0", "dev sp1", "dev sp2", "dev sp3"})
    EXPECT_NE(r.out.find(dev), std::string::npos) << r.out;
  for (const std::string node : {"dc-tor0", "dc-tor1"}) {
    r = sh("ip netns exec tb-" + lab + "-" + node +
           " cat /proc/sys/net/ipv4/fib_multipath_hash_policy");
    EXPECT_EQ(r.out, "1\n") << node;
  }
  const std::string json = dir + "/ecmp.json";
  r = sh("TESTBEDCTL_RESULTS_DIR=" + dir + " timeout 300 " + tbctl() + " train " + lab +
         " --channels 8 --params 1000000 --grad-bytes 4 --layers 2 --bucket 4M"
         " --activation-bytes 16K --compute 20ms --steps 2 --warmup 1 --json " +
         json);
  ASSERT_EQ(r.rc, 0) << r.out;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  const auto& row = j[0]["rows"][0];
  EXPECT_EQ(row["servers"], 8) << row.dump();
  EXPECT_EQ(row["wrong"], 0) << row.dump();
  EXPECT_TRUE(row["errors"].empty()) << row.dump();
  ASSERT_EQ(row["ecmp"].size(), 2u) << row.dump(1);
  for (const auto& group : row["ecmp"]) {
    EXPECT_EQ(group["links"].size(), 4u) << group.dump();
    EXPECT_GT(group["bytes"].get<uint64_t>(), 0u) << group.dump();
    EXPECT_GE(group["carrying"].get<int>(), 2) << group.dump();
  }
  EXPECT_NE(r.out.find("ECMP dc/tor1 -> spines"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

// hz-bj's Hangzhou cluster (4 servers x 4 GPUs, dual-ToR rails, 2 spines): training steps at 2
// and 4 servers (8 and 16 ranks) with tensor parallelism over NVLink inside each server complete
// over TCP with every reduced gradient and activation correct. A bound on a hang, no figure.
TEST(TrainHz, StepsCompleteWithCorrectGradientsOnSixteenGpus) {
  TB_REQUIRE_ROOT();
  std::string dir = "/tmp/tb-e2e-trainhz-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string lab = unique_lab("th");
  LabGuard guard(lab);
  auto r = testbedctl("up " + scenario("hz-bj.toml") + " --name " + lab);
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string json = dir + "/hz.json";
  r = sh("TESTBEDCTL_RESULTS_DIR=" + dir + " timeout 300 " + tbctl() + " train " + lab +
         " --ranks hz --servers 2,4 --tp 2 --params 200000 --grad-bytes 4 --layers 2"
         " --bucket 128K --activation-bytes 16K --compute 20ms --compute-scale 1 --steps 2"
         " --warmup 1 --json " +
         json);
  ASSERT_EQ(r.rc, 0) << r.out;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  const auto& rows = j[0]["rows"];
  ASSERT_EQ(rows.size(), 2u) << j.dump(1);
  EXPECT_EQ(rows[0]["ranks"], 8);
  EXPECT_EQ(rows[1]["ranks"], 16);
  for (const auto& row : rows) {
    EXPECT_EQ(row["tp"], 2) << row.dump();
    EXPECT_EQ(row["wrong"], 0) << row.dump();
    EXPECT_EQ(row["steps"], 2) << row.dump();
    EXPECT_TRUE(row["errors"].empty()) << row.dump();
    EXPECT_TRUE(row["bytes_per_step"].contains("nvl")) << row.dump();
    EXPECT_TRUE(row["bytes_per_step"].contains("rail")) << row.dump();
  }
  std::filesystem::remove_all(dir);
}

// run with a training workload: its steps are run's iterations through a link-down on the rail;
// the lab is run's own (mini with the workload and the fault appended), taken down by --down.
TEST(TrainRun, TrainingStepsAreRunsIterationsThroughAFault) {
  TB_REQUIRE_ROOT();
  std::string dir = "/tmp/tb-e2e-trainrun-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string lab = unique_lab("trr");
  LabGuard guard(lab);
  std::ifstream in(scenario("mini.toml"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  text += R"(
[[workload]]
name = "t"
kind = "training"
params = 100000
grad_bytes = 4
layers = 2
bucket_bytes = "64K"
activation_bytes = "16K"
compute = "20ms"

[[fault]]
at = "1s"
kind = "link-down"
a = "dc/s1/g1"
b = "dc/tor0"
for = "500ms"
)";
  const std::string path = dir + "/train-run.toml";
  std::ofstream(path) << text;
  auto r = sh("TESTBEDCTL_RESULTS_DIR=" + dir + " timeout 300 " + tbctl() + " run " + path +
              " --name " + lab + " --workload t --down");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("workload t: training steps (100000 parameters) over 4 ranks"),
            std::string::npos)
      << r.out;
  nlohmann::json summary;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.path().filename() == "summary.json") {
      std::ifstream f(e.path());
      summary = nlohmann::json::parse(f, nullptr, false);
    }
  ASSERT_TRUE(summary.is_object()) << r.out;
  EXPECT_GE(summary["iterations"].get<int>(), 3) << summary.dump(1);
  EXPECT_EQ(summary["workload_wrong"], 0) << summary.dump(1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tb::e2e
