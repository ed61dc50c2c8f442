// [[workload]] kind = "training" and [scale] compute in the scenario loader: the model's keys,
// the sweep of server counts, and the errors each takes at its file:line:col; keys of the other
// kinds are refused.
#include <gtest/gtest.h>

#include "scenario/loader.h"
#include "scenario_text.h"

namespace tb::scenario {
namespace {

using testing_text::kHead;
using testing_text::load_error;

TEST(ScenarioTraining, LoadsTheModelParallelismAndSweep) {
  auto s = load_text(std::string(kHead) + R"(
[scale]
bandwidth = 1000
compute = 50

[[workload]]
name = "gpt"
kind = "training"
params = 50_000_000
grad_bytes = 2
activation_bytes = "2M"
layers = 12
micro_batches = 4
samples = 2
tp = 2
pp = 2
bucket_bytes = "25M"
compute = "3ms"
steps = 5
warmup = 2
channels = 2
servers = [1, 2]

[[workload]]
name = "small"
kind = "training"
params = 1000
)",
                     "x.toml");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_DOUBLE_EQ(s->scale.compute, 50);
  ASSERT_EQ(s->workloads.size(), 2u);
  const auto& w = s->workloads[0];
  EXPECT_EQ(w.kind, "training");
  const auto& m = w.training;
  EXPECT_EQ(m.params, 50'000'000u);
  EXPECT_EQ(m.activation_bytes, 2u << 20);
  EXPECT_EQ(m.layers, 12);
  EXPECT_EQ(m.micro_batches, 4);
  EXPECT_EQ(m.samples, 2);
  EXPECT_EQ(m.tp, 2);
  EXPECT_EQ(m.pp, 2);
  EXPECT_EQ(m.bucket_bytes, 25u << 20);
  EXPECT_EQ(m.compute.ns, 3'000'000);
  EXPECT_EQ(m.steps, 5);
  EXPECT_EQ(w.warmup, 2);
  EXPECT_EQ(w.channels, 2);
  EXPECT_EQ(m.servers, (std::vector<int>{1, 2}));
  const auto& d = s->workloads[1];
  EXPECT_EQ(d.training.params, 1000u);
  EXPECT_EQ(d.training.tp, 1);
  EXPECT_EQ(d.warmup, 1);
  EXPECT_TRUE(d.training.servers.empty());
}

TEST(ScenarioTraining, EachBadFieldIsNamedAtItsPlace) {
  const std::string m = load_error(std::string(kHead) + R"(
[[workload]]
name = "w"
kind = "training"
layers = 5
pp = 2
servers = [2, 1]
op = "allreduce"
command = "x"
micro_batches = 0
)");
  EXPECT_HAS(m, "x.toml:12:1: workload \"w\": params: missing");
  EXPECT_HAS(m, "x.toml:15:10: workload \"w\": layers: layers (5) must divide into pp = 2");
  EXPECT_HAS(m, "x.toml:17:15: workload \"w\": servers: must increase");
  EXPECT_HAS(m, "x.toml:18:6: workload \"w\": op: only for kind = \"collective\"");
  EXPECT_HAS(m, "x.toml:19:11: workload \"w\": command: only for kind = \"command\"");
  EXPECT_HAS(m, "x.toml:20:17: workload \"w\": micro_batches:");
  const std::string k = load_error(std::string(kHead) + R"(
[scale]
compute = 0

[[workload]]
name = "c"
kind = "collective"
op = "allreduce"
params = 5
)");
  EXPECT_HAS(k, "x.toml:13:11: scale: compute:");
  EXPECT_HAS(k, "workload \"c\": params: only for kind = \"training\"");
}

}  // namespace
}  // namespace tb::scenario
