// [[workload]] kind = "command" in the scenario loader: command (an array, or a string split at
// spaces), ranks, tier, progress (a regular expression), and the errors each takes at its
// file:line:col; keys of the other kinds are refused.
#include <gtest/gtest.h>

#include "scenario/loader.h"
#include "scenario_text.h"

namespace tb::scenario {
namespace {

using testing_text::kHead;
using testing_text::load_error;

TEST(ScenarioCommand, LoadsCommandRanksTierAndProgress) {
  auto s = load_text(std::string(kHead) + R"(
[[workload]]
name = "ddp"
kind = "command"
command = ["/usr/bin/python3", "train.py", "--epochs", "1"]
ranks = ["hz/s0", "hz/s1/g1"]
tier = "frontend"
progress = "^step [0-9]+"

[[workload]]
name = "plain"
kind = "command"
command = "/bin/sh -c true"
)",
                     "x.toml");
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->workloads.size(), 2u);
  const auto& w = s->workloads[0];
  EXPECT_EQ(w.kind, "command");
  EXPECT_EQ(w.command, (std::vector<std::string>{"/usr/bin/python3", "train.py", "--epochs", "1"}));
  EXPECT_EQ(w.ranks, "hz/s0,hz/s1/g1");
  EXPECT_EQ(w.tier, "frontend");
  EXPECT_EQ(w.progress, "^step [0-9]+");
  const auto& p = s->workloads[1];
  EXPECT_EQ(p.command, (std::vector<std::string>{"/bin/sh", "-c", "true"}));
  EXPECT_EQ(p.tier, "auto");
  EXPECT_EQ(p.progress, "");
  EXPECT_EQ(p.ranks, "all");
}

TEST(ScenarioCommand, EachBadFieldIsNamedAtItsPlace) {
  const std::string m = load_error(std::string(kHead) + R"(
[[workload]]
name = "w"
kind = "command"
tier = "ib"
progress = "step ("
op = "allreduce"
from = "hz"
)");
  EXPECT_HAS(m, "x.toml:12:1: workload \"w\": command: missing");
  EXPECT_HAS(m, "x.toml:15:8: workload \"w\": tier:");
  EXPECT_HAS(m, "auto");
  EXPECT_HAS(m, "x.toml:16:12: workload \"w\": progress: not a regular expression");
  EXPECT_HAS(m, "x.toml:17:6: workload \"w\": op: only for kind = \"collective\"");
  EXPECT_HAS(m, "x.toml:18:8: workload \"w\": from: only for kind = \"checkpoint\"");
  const std::string c = load_error(std::string(kHead) + R"(
[[workload]]
name = "c"
kind = "collective"
op = "allreduce"
command = ["/bin/true"]
)");
  EXPECT_HAS(c, "x.toml:16:11: workload \"c\": command: only for kind = \"command\"");
  const std::string e = load_error(std::string(kHead) + R"(
[[workload]]
name = "e"
kind = "command"
command = ""
ranks = "hz/s7"
)");
  EXPECT_HAS(e, "workload \"e\": command: must name a program");
  EXPECT_HAS(e, "workload \"e\": ranks:");
}

}  // namespace
}  // namespace tb::scenario
