// Planner goldens: the dry-run text of the shipped scenarios is pinned. After an intended
// change, regenerate with TB_UPDATE_GOLDENS=1 ./unit_tests --gtest_filter='PlanGolden*' and
// review the diff like code.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "plan/emulate.h"
#include "plan/plan.h"
#include "scenario/loader.h"

namespace tb::plan {
namespace {

void check_golden(const std::string& scenario, const std::string& golden) {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/" + scenario);
  ASSERT_TRUE(s) << s.error().message;
  auto p = compile(*s);
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
  check_golden("mini.toml", "mini.plan");
}
TEST(PlanGolden, HzBj) {
  check_golden("hz-bj.toml", "hz-bj.plan");
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
