// launch at hz-bj's scale: a PyTorch DDP job (gloo, /usr/bin/python3) over hz's 16 GPUs (4
// servers x 4, dual-ToR rails) trains a few steps and every rank ends with the same parameters;
// per-rank logs exist. On a 2-core host most of its minute is 16 interpreters importing torch
// (measured 2026-12-02: 50 s wall under a load of ~13), so this suite stands alone
// (--gtest_filter=LaunchHz.*) and bounds the job with --timeout 10m.
#include <fstream>
#include <sstream>

#include "core/process.h"
#include "e2e_util.h"

namespace tb::e2e {
namespace {

TEST(LaunchHz, PytorchDdpOnSixteenGpusEndsWithIdenticalParametersOnEveryRank) {
  TB_REQUIRE_ROOT();
  if (sh("/usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()'").rc !=
      0)
    GTEST_SKIP() << "no torch with gloo under /usr/bin/python3 (python3-torch)";
  char t[] = "/tmp/tb-e2e-launchhz-XXXXXX";
  const std::string results = mkdtemp(t);
  const std::string lab = unique_lab("eh");
  LabGuard guard(lab);
  auto up = testbedctl("up " + scenario("hz-bj.toml") + " --name " + lab);
  ASSERT_EQ(up.rc, 0) << up.out;
  const std::string job = std::string(TB_SOURCE_DIR) + "/tests/e2e/jobs/ddp_train.py";
  auto r = sh("TESTBEDCTL_RESULTS_DIR=" + results + " " + tbctl() + " launch " + lab +
              " --ranks hz --timeout 10m -- /usr/bin/python3 " + job + " --steps 3");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("16 rank(s) over rail"), std::string::npos) << r.out;
  std::string dir;
  for (const auto& e : std::filesystem::directory_iterator(results + "/" + lab))
    if (e.path().filename().string().starts_with("launch-")) dir = e.path().string();
  ASSERT_FALSE(dir.empty());
  for (int i = 0; i < 16; ++i) {
    std::ifstream log(dir + "/logs/rank" + std::to_string(i) + ".log");
    std::stringstream text;
    text << log.rdbuf();
    EXPECT_NE(text.str().find("params identical across 16 ranks"), std::string::npos)
        << "rank " << i << ":\n"
        << text.str();
  }
  std::filesystem::remove_all(results);
}

}  // namespace
}  // namespace tb::e2e
