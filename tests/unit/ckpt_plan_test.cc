// The checkpoint workload's plan and verdict without root: shards per source server, the
// emulated size, the primary WAN link and its rate, the class's DSCP, and the "cadence cannot
// keep up" warning in numbers for each mode; [expect] checkpoint_on_time's verdict; a cadence in
// training steps (scale-across.toml: the training's ring and the checkpoint share the WAN link);
// the run's iterations split by whether a replication was in flight; a replication's shards
// from two hosts (a lab over several) merged into one.
#include <gtest/gtest.h>

#include "experiment/checkpoint_workload.h"
#include "experiment/experiment.h"
#include "experiment/train_sweep.h"
#include "plan/plan.h"
#include "scenario/loader.h"

namespace tb::experiment {
namespace {

struct HzBj {
  scenario::Scenario s;
  lab::LabState st;
};

HzBj shipped(const std::string& file, const std::string& lab) {
  HzBj h;
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/" + file);
  EXPECT_TRUE(s) << s.error().message;
  h.s = *s;
  auto p = plan::compile(h.s, plan::assumed_host("unit"), plan::PlanOptions{});
  EXPECT_TRUE(p) << p.error().message;
  h.st.lab = lab;
  h.st.topo = p->topo;
  return h;
}

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

TEST(CkptPlan, ACadenceInStepsCountsATrainingWorkloadsSteps) {
  auto h = shipped("scale-across.toml", "xregion");
  ASSERT_EQ(h.s.workloads.size(), 2u);
  const auto& train = h.s.workloads[0];
  const auto& w = h.s.workloads[1];
  ASSERT_EQ(train.kind, "training");
  ASSERT_EQ(w.kind, "checkpoint");
  EXPECT_EQ(w.every_steps, 20);
  auto p = plan_checkpoint(h.s, w, h.st);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->sources, (std::vector<std::string>{"hz/s0", "hz/s1"}));
  EXPECT_EQ(p->destinations, (std::vector<std::string>{"bj/s0", "bj/s1"}));
  EXPECT_EQ(p->wan, "ec");
  EXPECT_DOUBLE_EQ(p->wan_bps, 10e6);  // 10 Gbit/s / 1000
  EXPECT_EQ(p->dscp, 8);
  EXPECT_EQ(p->warning, "");  // a cadence in steps is judged as it runs, not planned
  // The training alone steps: without it the cadence has nothing to count (exit 2, naming it).
  auto only = h.s;
  std::erase_if(only.workloads, [](const auto& x) { return x.kind == "training"; });
  auto bad = plan_checkpoint(only, only.workloads[0], h.st);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("collective, command or training workload"), std::string::npos)
      << bad.error().message;
}

TEST(CkptPlan, ScaleAcrossTrainingRingCrossesTheWanTheCheckpointUses) {
  auto h = shipped("scale-across.toml", "xregion");
  auto j = training_run_job(h.s, h.s.workloads[0], h.st, workload::TransportOptions{}, 30000, "id",
                            "/nonexistent");
  ASSERT_TRUE(j) << j.error().message;
  ASSERT_EQ(j->ranks.size(), 4u);
  EXPECT_EQ(j->ranks[1].node, "hz/s1/g0");
  EXPECT_EQ(j->ranks[2].node, "bj/s0/g0");
  // The ring's neighbours across the regions reach each other by the WAN (the GPUs' NVLink-side
  // addresses, routed through their servers and the transit routers), the others on the rail.
  auto tier = [&](int a, int b) {
    const auto& p = j->peers[a][b];
    return p.tier.empty() ? j->peers[b][a].tier : p.tier;
  };
  EXPECT_EQ(tier(0, 1), "rail");
  EXPECT_EQ(tier(2, 3), "rail");
  EXPECT_NE(tier(1, 2), "rail");
  EXPECT_NE(tier(1, 2), "nvl");
  EXPECT_NE(tier(0, 3), "rail");
}

TEST(CkptSteps, IterationsSplitByWhetherAReplicationWasInFlight) {
  auto rep = [](int64_t a, int64_t b) {
    CheckpointRep r;
    r.start_ns = a;
    r.end_ns = b;
    return r;
  };
  const int64_t ms = 1'000'000;
  // Iterations of 100, 100, 300, 500, 120 ms; a replication 250..700 ms overlaps the 3rd and 4th
  // (the 2nd ends at 200, before it; the 5th starts at 1000, after it).
  std::vector<metrics::Iteration> its = {{0, 100 * ms},
                                         {100 * ms, 200 * ms},
                                         {200 * ms, 500 * ms},
                                         {500 * ms, 1000 * ms},
                                         {1000 * ms, 1120 * ms}};
  auto sp = split_steps(its, {rep(250 * ms, 700 * ms)});
  EXPECT_EQ(sp.during, 2);
  EXPECT_DOUBLE_EQ(sp.during_ms, 400);  // median of 300 and 500
  EXPECT_EQ(sp.outside, 3);
  EXPECT_DOUBLE_EQ(sp.outside_ms, 100);  // median of 100, 100, 120
  // Touching is not overlapping: a replication 200..200 ms meets two iterations at their ends.
  sp = split_steps(its, {rep(200 * ms, 200 * ms)});
  EXPECT_EQ(sp.during, 0);
  EXPECT_EQ(sp.outside, 5);
  // No replication: every iteration is outside; no iteration: nothing either way.
  sp = split_steps(its, {});
  EXPECT_EQ(sp.outside, 5);
  EXPECT_DOUBLE_EQ(sp.during_ms, 0);
  sp = split_steps({}, {rep(0, 10)});
  EXPECT_EQ(sp.during + sp.outside, 0);
}

// Over several hosts each host reports the shards it sent; the coordinator's replication k is
// their union: bytes added, first start to last end, ok and on time only when every part is.
TEST(CkptRep, SharesFromTwoHostsMergeIntoOneReplication) {
  CheckpointRep a;
  a.rep = 2;
  a.full = true;
  a.payload = 100;
  a.wire = 110;
  a.due_ns = 1000;
  a.start_ns = 1010;
  a.end_ns = 3000;
  a.ok = true;
  a.shards = {{1, "hz/s1", "bj/s1", 100, 0xabcdef0123456789ull, 0xabcdef0123456789ull, true}};
  CheckpointRep b = a;
  b.payload = 50;
  b.wire = 60;
  b.start_ns = 1005;
  b.end_ns = 4000;
  b.on_time = false;
  b.shards = {{0, "hz/s0", "bj/s0", 50, 7, 8, false}};
  b.ok = false;
  b.error = "shard 0 checksum mismatch";
  // Through JSON, as it travels: the same replication, checksums in hex.
  const auto j = rep_to_json(b);
  EXPECT_EQ(j["shards"][0]["checksum"], "0000000000000007");
  const CheckpointRep back = rep_from_json(j);
  EXPECT_EQ(back.shards.size(), 1u);
  EXPECT_EQ(back.shards[0].receiver_checksum, 8u);
  EXPECT_EQ(back.end_ns, 4000);
  EXPECT_FALSE(back.on_time);
  merge_rep(a, back);
  EXPECT_EQ(a.payload, 150u);
  EXPECT_EQ(a.wire, 170u);
  EXPECT_EQ(a.start_ns, 1005);
  EXPECT_EQ(a.end_ns, 4000);
  EXPECT_DOUBLE_EQ(a.seconds, 2995e-9);
  EXPECT_FALSE(a.ok);
  EXPECT_FALSE(a.on_time);
  EXPECT_EQ(a.error, "shard 0 checksum mismatch");
  ASSERT_EQ(a.shards.size(), 2u);
  EXPECT_EQ(a.shards[0].shard, 0);  // by shard number
  EXPECT_EQ(a.shards[1].checksum, 0xabcdef0123456789ull);
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

// The gold probe's p99 counts lost probes as slower than any answered one.
TEST(GoldProbe, PercentileWithLost) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);                // 1..100
  EXPECT_NEAR(*percentile_with_lost(v, 0, 0.99), 99.01, 1e-9);  // numpy's linear
  EXPECT_NEAR(*percentile_with_lost(v, 0, 0.5), 50.5, 1e-9);
  // 1 lost of 101: rank 99 of 0..100 is the answered 100.
  EXPECT_NEAR(*percentile_with_lost(v, 1, 0.99), 100, 1e-9);
  // 2 lost of 102: rank 99.99 interpolates towards a lost one.
  EXPECT_FALSE(percentile_with_lost(v, 2, 0.99));
  EXPECT_FALSE(percentile_with_lost({}, 0, 0.99));
  EXPECT_FALSE(percentile_with_lost({}, 3, 0.5));
  EXPECT_DOUBLE_EQ(*percentile_with_lost({7}, 0, 0.99), 7);
}

TEST(GoldProbe, VerdictAgainstTheBound) {
  scenario::Expect e;
  GoldProbe g;
  g.src = "hz/s0";
  g.dst = "bj/s0";
  g.dscp = 46;
  g.measured = true;
  g.sent = 500;
  g.received = 499;
  g.p99_with_lost_ms = 80;
  EXPECT_FALSE(gold_verdict(e, g));  // not asked
  e.max_gold_p99_ms = 150;
  auto v = gold_verdict(e, g);
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->ok);
  EXPECT_EQ(v->text,
            "max_gold_p99_ms <= 150: measured 80.0 ms (1 of 500 lost, counted as slowest) (the "
            "gold probe hz/s0 -> bj/s0, DSCP 46)");
  g.p99_with_lost_ms = 380.5;
  v = gold_verdict(e, g);
  EXPECT_FALSE(v->ok);
  EXPECT_DOUBLE_EQ(*v->measured, 380.5);
  g.p99_with_lost_ms.reset();  // the p99 is a lost probe
  v = gold_verdict(e, g);
  EXPECT_FALSE(v->ok);
  EXPECT_NE(v->text.find("a lost probe (1 of 500 lost"), std::string::npos) << v->text;
  g.measured = false;  // the probe printed nothing: no pass
  EXPECT_FALSE(gold_verdict(e, g)->ok);
  EXPECT_FALSE(gold_verdict(e, std::nullopt)->ok);
}

}  // namespace
}  // namespace tb::experiment
