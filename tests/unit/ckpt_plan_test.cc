// The checkpoint workload's plan and verdict without root: shards per source server, the
// emulated size, the primary WAN link and its rate, the class's DSCP, and the "cadence cannot
// keep up" warning in numbers for each mode; [expect] checkpoint_on_time's verdict.
#include <gtest/gtest.h>

#include "experiment/checkpoint_workload.h"
#include "experiment/experiment.h"
#include "plan/plan.h"
#include "scenario/loader.h"

namespace tb::experiment {
namespace {

struct HzBj {
  scenario::Scenario s;
  lab::LabState st;
};

HzBj hzbj() {
  HzBj h;
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/hz-bj.toml");
  EXPECT_TRUE(s) << s.error().message;
  h.s = *s;
  auto p = plan::compile(h.s, plan::assumed_host("unit"), plan::PlanOptions{});
  EXPECT_TRUE(p) << p.error().message;
  h.st.lab = "hzbj";
  h.st.topo = p->topo;
  return h;
}

TEST(CkptPlan, ShippedCheckpointShardsKeepsUpAndIsBronze) {
  auto h = hzbj();
  const auto& w = h.s.workloads[1];
  ASSERT_EQ(w.kind, "checkpoint");
  auto p = plan_checkpoint(h.s, w, h.st);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->sources, (std::vector<std::string>{"hz/s0", "hz/s1", "hz/s2", "hz/s3"}));
  EXPECT_EQ(p->destinations, (std::vector<std::string>{"bj/s0", "bj/s1"}));
  EXPECT_EQ(p->emulated_bytes, 1073742u);  // 1 GiB / 1000, rounded
  EXPECT_EQ(p->shard_bytes, 268436u);      // in 4, rounded up
  EXPECT_EQ(p->wan, "ec");
  EXPECT_DOUBLE_EQ(p->wan_bps, 400e6);
  EXPECT_EQ(p->dscp, 8);  // bronze: CS1
  EXPECT_NEAR(p->min_seconds, 1073742 * 8 / 400e6, 1e-9);
  EXPECT_EQ(p->warning, "");
}

TEST(CkptPlan, ACadenceTheLinkCannotKeepUpWithIsAWarningInNumbers) {
  auto h = hzbj();
  auto w = h.s.workloads[1];
  w.bytes = uint64_t{1} << 40;  // 1 TiB: 1.1 GB emulated, 22 s at 400 Mbit/s, every 5 s
  auto p = plan_checkpoint(h.s, w, h.st);
  ASSERT_TRUE(p);
  EXPECT_NEAR(p->min_seconds, 1099511628.0 * 8 / 400e6, 1e-6);
  EXPECT_NE(p->warning.find("checkpoint ckpt-bj cannot keep up"), std::string::npos) << p->warning;
  EXPECT_NE(p->warning.find("needs at least 21.99 s at the ec link's 400Mbit"), std::string::npos)
      << p->warning;
  EXPECT_NE(p->warning.find("every 5.00 s"), std::string::npos) << p->warning;
  // Incremental sends the changed fraction on average, and keeps up.
  w.mode = "incremental";
  w.changed = 0.1;
  p = plan_checkpoint(h.s, w, h.st);
  EXPECT_NEAR(p->min_seconds, 1099511628.0 * 0.1 * 8 / 400e6, 1e-6);
  EXPECT_EQ(p->warning, "");
  // Layered: (one full + 3 incremental) / 4 = 0.325 of full: 7.1 s, too long again.
  w.mode = "layered";
  w.full_every = 4;
  p = plan_checkpoint(h.s, w, h.st);
  EXPECT_NEAR(p->min_seconds, 1099511628.0 * 0.325 * 8 / 400e6, 1e-6);
  EXPECT_NE(p->warning.find("(layered mode)"), std::string::npos) << p->warning;
  // A cadence in steps needs a workload that steps.
  w.every_steps = 10;
  auto only = h.s;
  std::erase_if(only.workloads, [](const auto& x) { return x.kind != "checkpoint"; });
  EXPECT_FALSE(plan_checkpoint(only, w, h.st));
}

TEST(CkptPlan, OnTimeVerdictCountsLateReplications) {
  scenario::Expect e;
  EXPECT_FALSE(checkpoint_verdict(e, 1, 5, "x"));  // not asked
  e.checkpoint_on_time = true;
  auto v = checkpoint_verdict(e, 0, 5, "ckpt-bj every 5s");
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->ok);
  v = checkpoint_verdict(e, 2, 5, "ckpt-bj every 5s");
  EXPECT_FALSE(v->ok);
  EXPECT_EQ(v->text, "checkpoint_on_time = true: 2 of 5 replication(s) late (ckpt-bj every 5s)");
  EXPECT_FALSE(checkpoint_verdict(e, 0, 0, "none ran")->ok);  // nothing replicated is no pass
}

}  // namespace
}  // namespace tb::experiment
