// launch on a live mini lab: each rank gets torchrun's environment, the tier's interface and the
// lab's hosts file; a PyTorch DDP job (gloo, /usr/bin/python3) trains and ends with identical
// parameters on every rank; the first failing rank ends the job within the grace period (SIGKILL
// for a rank that ignores SIGTERM); --timeout, Ctrl-C and `down` leave no rank behind; bad input
// is exit 2 before anything starts. Every bound below is a bound on a hang, not a timing claim.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "core/process.h"
#include "e2e_util.h"

namespace tb::e2e {
namespace {

bool have_torch() {
  return sh("/usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()'")
             .rc == 0;
}

class Launch : public SharedMiniLab<Launch> {
 protected:
  static void SetUpTestSuite() {
    up_shared("el", "launch");
    if (results_.empty()) return;
    forever_ = results_ + "/forever.sh";  // a rank that runs until it is ended (bounded: 10 min)
    std::ofstream(forever_)
        << "#!/bin/sh\ni=0\nwhile [ $i -lt 600 ]; do sleep 1; i=$((i+1)); done\n";
    std::filesystem::permissions(forever_, std::filesystem::perms::owner_all);
  }
  static std::string env() { return "TESTBEDCTL_RESULTS_DIR=" + results_; }
  static CmdResult launch(const std::string& args) {
    return sh(env() + " " + tbctl() + " launch " + lab_ + " " + args);
  }
  // The results directory of the newest launch (job.json inside).
  static std::string newest_job_dir() {
    std::string best;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(results_ + "/" + lab_, ec))
      if (e.path().filename().string().starts_with("launch-") &&
          std::filesystem::exists(e.path() / "job.json") && e.path().string() > best)
        best = e.path().string();
    return best;
  }
  static int job_dirs() {
    int n = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(results_ + "/" + lab_, ec))
      n += e.path().filename().string().starts_with("launch-");
    return n;
  }
  static nlohmann::json read_json(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in, nullptr, false);
  }
  // Processes of any launch job on this lab: the lab's owner marker and a job id.
  static std::vector<int> job_pids() {
    std::vector<int> out;
    for (int pid : owned_processes("testbedctl lab=" + lab_)) {
      std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
      for (std::string v; std::getline(in, v, '\0');)
        if (v.starts_with("TESTBEDCTL_JOB=")) {
          out.push_back(pid);
          break;
        }
    }
    return out;
  }

  static inline std::string forever_;
};

TEST_F(Launch, EveryRankGetsTorchrunsEnvironmentTheTiersInterfaceAndTheLabsNames) {
  auto r = launch(
      "-- /bin/sh -c 'echo env $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK "
      "$ROLE_RANK $MASTER_ADDR $MASTER_PORT $GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME "
      "${TORCHELASTIC_RUN_ID%%-*}; getent hosts dc-s0-g0'");
  ASSERT_EQ(r.rc, 0) << r.out;
  // mini: 2 servers x 2 GPUs, so auto is the rail; rank 0 (dc/s0/g0) is the master.
  const auto job = read_json(newest_job_dir() + "/job.json");
  ASSERT_TRUE(job.is_object());
  EXPECT_EQ(job["tier"], "rail");
  EXPECT_EQ(job["ifname"], "rail");
  EXPECT_EQ(job["state"], "succeeded");
  ASSERT_EQ(job["ranks"].size(), 4u);
  const std::string master = job["master_addr"];
  EXPECT_EQ(master, job["ranks"][0]["addr"]);
  const char* nodes[] = {"dc/s0/g0", "dc/s0/g1", "dc/s1/g0", "dc/s1/g1"};
  for (int i = 0; i < 4; ++i) {
    const auto& jr = job["ranks"][i];
    EXPECT_EQ(jr["node"], nodes[i]);
    EXPECT_EQ(jr["exit_code"], 0);
    const std::string want = "[rank " + std::to_string(i) + " " + nodes[i] + "] env " +
                             std::to_string(i) + " " + std::to_string(i % 2) + " 4 2 " +
                             std::to_string(i / 2) + " " + std::to_string(i) + " " + master +
                             " 29500 rail rail launch";
    EXPECT_NE(r.out.find(want + "\n"), std::string::npos) << want << "\n" << r.out;
    // The lab's hosts file is the rank's /etc/hosts.
    EXPECT_NE(r.out.find("[rank " + std::to_string(i) + " " + nodes[i] + "] 198.18."),
              std::string::npos)
        << r.out;
    std::ifstream log(newest_job_dir() + "/logs/rank" + std::to_string(i) + ".log");
    std::string first;
    std::getline(log, first);
    EXPECT_TRUE(first.starts_with("env " + std::to_string(i) + " ")) << first;
  }
  // One server: auto is NVLink; the frontend names the same interface but says why.
  r = launch("--ranks dc/s1 -- /bin/sh -c 'echo $GLOO_SOCKET_IFNAME $MASTER_ADDR'");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(read_json(newest_job_dir() + "/job.json")["tier"], "nvl");
  EXPECT_NE(r.out.find("[rank 1 dc/s1/g1] nvl 198.18."), std::string::npos) << r.out;
  r = launch("--tier frontend -- /bin/sh -c 'echo $GLOO_SOCKET_IFNAME'");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("[rank 3 dc/s1/g1] nvl\n"), std::string::npos) << r.out;
}

TEST_F(Launch, BadInputIsExitTwoAndStartsNothing) {
  const int before = job_dirs();
  struct Case {
    std::string args, says;
  } cases[] = {
      {"-- no-such-program-xyz", "no-such-program-xyz: command not found"},
      {"-- ./no/such/path", "./no/such/path: command not found"},
      {"--tier bogus -- true", "'bogus' is not a tier; use auto, nvl, rail or frontend"},
      {"--tier nvl -- true", "--tier nvl: the ranks span 2 servers"},
      {"--ranks dc/s9 -- true", "--ranks: 'dc/s9' matches no GPU"},
      {"--timeout soon -- true", "--timeout"},
  };
  for (const auto& c : cases) {
    auto r = launch(c.args);
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << "\n" << r.out;
  }
  EXPECT_EQ(job_dirs(), before) << "a refused launch made a results directory";
  EXPECT_TRUE(job_pids().empty());
}

TEST_F(Launch, PytorchDdpTrainsAndEveryRankEndsWithTheSameParameters) {
  if (!have_torch()) GTEST_SKIP() << "no torch with gloo under /usr/bin/python3 (python3-torch)";
  const std::string job = std::string(TB_SOURCE_DIR) + "/tests/e2e/jobs/ddp_train.py";
  auto r = launch("--timeout 10m -- /usr/bin/python3 " + job + " --steps 4");
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string dir = newest_job_dir();
  for (int i = 0; i < 4; ++i) {
    std::ifstream log(dir + "/logs/rank" + std::to_string(i) + ".log");
    std::stringstream text;
    text << log.rdbuf();
    EXPECT_NE(text.str().find("params identical across 4 ranks"), std::string::npos)
        << "rank " << i << ":\n"
        << text.str();
    EXPECT_NE(text.str().find("step 4 loss"), std::string::npos) << text.str();
    EXPECT_NE(text.str().find("via rail"), std::string::npos) << text.str();
  }
  EXPECT_TRUE(job_pids().empty());
}

TEST_F(Launch, ADdpRankExitingOneEndsTheJobWithExitOne) {
  if (!have_torch()) GTEST_SKIP() << "no torch with gloo under /usr/bin/python3 (python3-torch)";
  const std::string job = std::string(TB_SOURCE_DIR) + "/tests/e2e/jobs/ddp_train.py";
  auto r = launch("--grace 2s --timeout 10m -- /usr/bin/python3 " + job +
                  " --steps 100000 --fail-rank 2 --fail-step 2");
  EXPECT_EQ(r.rc, 1) << r.out;
  const auto j = read_json(newest_job_dir() + "/job.json");
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["ranks"][2]["exit_code"], 1) << j.dump(1);
  // The others' allreduce fails on its own (gloo: connection closed) or they are ended: either
  // way within the grace (2 s) of the failure, with a generous margin for a loaded host.
  const double failed_at = j["ranks"][2]["end_s"];
  for (int i : {0, 1, 3}) {
    EXPECT_NE(j["ranks"][i]["exit_code"], 0) << j.dump(1);
    EXPECT_LT(j["ranks"][i]["end_s"].get<double>(), failed_at + 2 + 10) << j.dump(1);
  }
  EXPECT_NE(r.out.find("[rank 2 dc/s1/g0] rank 2: failing on purpose at step 2"), std::string::npos)
      << r.out;
  EXPECT_TRUE(job_pids().empty());
}

TEST_F(Launch, AFailingRankEndsTheJobWithinTheGracePeriod) {
  // Rank 2 exits 1; rank 1 ignores SIGTERM (its shell does; the sleep it waits on dies and the
  // loop goes on), so only the SIGKILL after --grace ends it; the rest end on SIGTERM.
  auto r = launch(
      "--grace 2s -- /bin/sh -c 'if [ $RANK = 2 ]; then sleep 1; exit 1; fi; "
      "if [ $RANK = 1 ]; then trap \"\" TERM; fi; i=0; while [ $i -lt 600 ]; do sleep 1; "
      "i=$((i+1)); done'");
  EXPECT_EQ(r.rc, 1) << r.out;
  const auto job = read_json(newest_job_dir() + "/job.json");
  ASSERT_TRUE(job.is_object()) << r.out;
  EXPECT_EQ(job["state"], "failed");
  EXPECT_EQ(job["first_failed"], 2);
  EXPECT_EQ(job["ranks"][2]["exit_code"], 1);
  EXPECT_EQ(job["ranks"][1]["exit_code"], 128 + SIGKILL) << job.dump(1);
  EXPECT_EQ(job["ranks"][0]["exit_code"], 128 + SIGTERM) << job.dump(1);
  const double failed_at = job["ranks"][2]["end_s"];
  for (int i : {0, 1, 3})  // within the grace (2 s) and a generous margin for a loaded host
    EXPECT_LT(job["ranks"][i]["end_s"].get<double>(), failed_at + 2 + 10) << job.dump(1);
  EXPECT_NE(r.out.find("failed: rank 2 (dc/s1/g0) exit 1"), std::string::npos) << r.out;
  EXPECT_TRUE(job_pids().empty());
}

TEST_F(Launch, TimeoutAndCtrlCEndEveryRank) {
  const std::string forever = "-- " + forever_;
  auto r = launch("--timeout 2s " + forever);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(read_json(newest_job_dir() + "/job.json")["timed_out"].get<bool>());
  EXPECT_TRUE(job_pids().empty());

  Background job("launch " + lab_ + " " + forever, "/dev/null", env());
  std::vector<int> pids;
  for (int i = 0; i < 200 && pids.size() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    pids = job_pids();
  }
  ASSERT_GE(pids.size(), 4u);
  EXPECT_EQ(job.interrupt(30), 130);
  EXPECT_TRUE(job_pids().empty()) << "ranks survived Ctrl-C";
}

TEST_F(Launch, MpiRunsEachRankInItsGpusNamespaceAndAllreduceIsCorrect) {
#ifndef TB_MPI_ALLREDUCE
  GTEST_SKIP() << "built without MPI (libopenmpi-dev): no allreduce check program";
#else
  if (sh("command -v mpirun").rc != 0) GTEST_SKIP() << "no mpirun (openmpi-bin)";
  // Where each MPI rank runs: its own namespace, with the rail address of its GPU.
  auto r = launch(
      "--mpi --timeout 90s -- /bin/sh -c 'echo where $OMPI_COMM_WORLD_RANK "
      "$(readlink /proc/self/ns/net)'");
  ASSERT_EQ(r.rc, 0) << r.out;
  std::set<std::string> namespaces;  // mpirun --tag-output: "[1,R]<stdout>:where R net:[INODE]"
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (const auto at = line.find("<stdout>:where "); at != std::string::npos)
      namespaces.insert(line.substr(line.find(" net:", at)));
  EXPECT_EQ(namespaces.size(), 4u) << r.out;
  const std::string dir = newest_job_dir();
  EXPECT_EQ(read_json(dir + "/job.json")["kind"], "mpi");
  EXPECT_TRUE(std::filesystem::exists(dir + "/hostfile"));

  r = launch("--mpi --timeout 90s -- " + std::string(TB_MPI_ALLREDUCE) + " 4096");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("mpi allreduce correct on 4 ranks"), std::string::npos) << r.out;
  EXPECT_TRUE(job_pids().empty());
#endif
}

// Last: takes the lab down.
TEST_F(Launch, DownEndsEveryRank) {
  Background job("launch " + lab_ + " -- " + forever_, "/dev/null", env());
  std::vector<int> pids;
  for (int i = 0; i < 200 && pids.size() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    pids = job_pids();
  }
  ASSERT_GE(pids.size(), 4u);
  auto r = testbedctl("down " + lab_);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(job.wait(30), 1) << "launch did not exit 1 after down";
  EXPECT_TRUE(job_pids().empty()) << "ranks survived down";
}

}  // namespace
}  // namespace tb::e2e
