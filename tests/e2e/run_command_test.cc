// run with a [[workload]] kind = "command" on mini: the PyTorch DDP job (tests/e2e/jobs/
// ddp_train.py, gloo over the rail, /usr/bin/python3) iterates, a flap of dc/s0/g0's rail port
// (down 500 ms, up, twice) stalls every rank's gradient allreduce, and the recovery table records
// the stall from the job's own "step N" lines; the run ends the job and leaves no rank behind.
#include <fstream>

#include "core/process.h"
#include "e2e_util.h"

namespace tb::e2e {
namespace {

TEST(RunCommand, ARailFlapStallsTheDdpJobAndTheRecoveryTableRecordsIt) {
  TB_REQUIRE_ROOT();
  if (sh("/usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()'").rc !=
      0)
    GTEST_SKIP() << "no torch with gloo under /usr/bin/python3 (python3-torch)";
  char t[] = "/tmp/tb-e2e-runcmd-XXXXXX";
  const std::string dir = mkdtemp(t);
  const std::string lab = unique_lab("ec");
  LabGuard guard(lab);
  std::ifstream in(scenario("mini.toml"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  // mini's own collective workload stays; --workload picks this one.
  text += R"(
[[workload]]
name = "ddp"
kind = "command"
command = ["/usr/bin/python3", ")" +
          std::string(TB_SOURCE_DIR) + R"(/tests/e2e/jobs/ddp_train.py", "--steps", "100000"]
ranks = "all"
tier = "rail"
progress = "^step [0-9]+ loss"

[[fault]]
at = "2s"
kind = "flap"
a = "dc/s0/g0"
b = "dc/tor0"
period = "1s"
count = 2
)";
  const std::string path = dir + "/cmd.toml";
  std::ofstream(path) << text;
  auto r = sh("TESTBEDCTL_RESULTS_DIR=" + dir + " " + tbctl() + " run " + path + " --name " + lab +
              " --workload ddp --down");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("RECOVERY"), std::string::npos) << r.out;
  nlohmann::json s;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.path().filename() == "summary.json") s = nlohmann::json::parse(std::ifstream(e.path()));
  ASSERT_TRUE(s.is_object()) << r.out;
  EXPECT_NE(s["transport"].get<std::string>().find("command over rail"), std::string::npos);
  EXPECT_GT(s["iterations"].get<int>(), 10) << s.dump(1);
  const auto& f = s["recovery"]["faults"];
  ASSERT_EQ(f.size(), 1u) << s.dump(1);
  // The port goes down for half a period (500 ms) twice (the fault's window spans both); a down
  // holds no completed allreduce, so the longest stall is at least 500 ms less one step that
  // may finish inside it (about 35 ms on mini; 250 ms covers a loaded host). Measured here:
  // 762 ms (TCP's retransmission timer adds to the outage).
  ASSERT_FALSE(f[0]["stall_ms"].is_null()) << f[0].dump(1);
  EXPECT_GT(f[0]["stall_ms"].get<double>(), 500 - 250) << f[0].dump(1);
  EXPECT_EQ(f[0]["detected_by"].get<std::string>().rfind("carrier_down", 0), 0u) << f[0].dump(1);
  // Each rank logged its steps; the run ended the job.
  bool logs = false;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    logs = logs || e.path().filename() == "rank3.log";
  EXPECT_TRUE(logs);
  EXPECT_TRUE(owned_processes("testbedctl lab=" + lab).empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tb::e2e
