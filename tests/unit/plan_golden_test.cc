// Planner goldens: the dry-run text of the shipped scenarios is pinned, planned for this kind of
// host (tbf + the delay stage; hz-bj also with Soft-RoCE, so its rxe devices show). After an
// intended change, regenerate with TB_UPDATE_GOLDENS=1 ./unit_tests --gtest_filter='PlanGolden*'
// and review the diff like code.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "plan/emulate.h"
#include "plan/plan.h"
#include "scenario/loader.h"

namespace tb::plan {
namespace {

// A host the goldens are planned for: this machine's kind (tbf, the NFQUEUE delay stage, no
// netem), with or without Soft-RoCE.
HostCaps golden_host(bool rxe) {
  HostCaps h = assumed_host("golden host");
  h.rxe = h.rxe_checked = rxe;
  h.rxe_detail = rxe ? "golden host has rxe" : "golden host has no rxe";
  return h;
}

void check_golden(const std::string& scenario, const std::string& golden, bool rxe) {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/" + scenario);
  ASSERT_TRUE(s) << s.error().message;
  auto p = compile(*s, golden_host(rxe), PlanOptions{});
  ASSERT_TRUE(p) << p.error().message;
  const std::string text = to_text(*p);
  const std::string path = std::string(TB_SOURCE_DIR) + "/tests/unit/golden/" + golden;
  if (const char* u = std::getenv("TB_UPDATE_GOLDENS"); u && std::string(u) == "1") {
    std::ofstream(path) << text;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing golden " << path;
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(text, want.str()) << "plan for " << scenario << " changed; see the comment on top";
}

TEST(PlanGolden, Mini) {
  check_golden("mini.toml", "mini.plan", false);
}
TEST(PlanGolden, HzBj) {
  check_golden("hz-bj.toml", "hz-bj.plan", true);
}
// The hashing experiment: each ToR's route to the other rail over 4 spine uplinks, and
// fib_multipath_hash_policy = 1 in the two ToRs (the only namespaces with a multipath route).
TEST(PlanGolden, Ecmp) {
  check_golden("ecmp.toml", "ecmp.plan", false);
}

TEST(Emulate, ScalesRateAndDelayAndFlagsWhatCannotBeEmulated) {
  scenario::LinkProfile p;
  p.rate = Rate{400e9};
  p.delay = Duration{25'000'000};
  p.jitter = Duration{1'000'000};
  p.loss_pct = 0.5;
  p.mtu = 1500;
  auto e = emulate(p, scenario::Scale{1000, 1, {}});
  EXPECT_DOUBLE_EQ(e.rate.bps, 400e6);
  EXPECT_EQ(e.delay.ns, 25'000'000);
  EXPECT_EQ(e.jitter.ns, 1'000'000);
  EXPECT_DOUBLE_EQ(e.loss_pct, 0.5);
  EXPECT_TRUE(e.notes.empty());

  auto slower = emulate(p, scenario::Scale{1000, 2, {}});
  EXPECT_EQ(slower.delay.ns, 50'000'000);

  p.rate = Rate{7.2e12};  // NVLink: 900 GB/s
  p.delay = Duration{100};
  p.jitter = Duration{0};
  auto nvl = emulate(p, scenario::Scale{100, 1, {}});
  EXPECT_EQ(nvl.delay.ns, 0);
  ASSERT_EQ(nvl.notes.size(), 2u);
  EXPECT_NE(nvl.notes[0].find("100ns"), std::string::npos);
  EXPECT_NE(nvl.notes[0].find("not emulated"), std::string::npos);
  EXPECT_NE(nvl.notes[1].find("72Gbit"), std::string::npos);
}

}  // namespace
}  // namespace tb::plan
