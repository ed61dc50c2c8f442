// The exercise format (exercise/spec.h): check.toml's loader and its file:line errors, task
// sheets' hints, and every shipped exercise under exercises/ loading whole (its scenario, and
// for a run check the scenario with the checker's faults, before and after the reference
// solution's kind of change).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "exercise/check.h"
#include "exercise/spec.h"
#include "scenario/loader.h"

namespace tb::exercise {
namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ExerciseCheckSpec, BenchLoads) {
  auto c = parse_check(R"([check]
measure = "bench"
workload = "job"
op = "allreduce"
bytes = "2M"
iters = 3
[target]
min_busbw_fraction = 0.9
of = "rail"
)",
                       "c.toml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->measure, Measure::kBench);
  EXPECT_EQ(c->workload, "job");
  EXPECT_EQ(c->bytes, 2u << 20);
  EXPECT_EQ(c->iters, 3);
  EXPECT_DOUBLE_EQ(*c->min_busbw_fraction, 0.9);
}

// Exercises 3 and 4: channels bound to NIC ports, the NIC's rate as the target, the ECMP bound.
TEST(ExerciseCheckSpec, PortsNicAndEcmpShare) {
  auto c = parse_check(R"([check]
measure = "bench"
workload = "job"
ports = "spread"
[target]
min_busbw_fraction = 0.8
of = "nic"
max_ecmp_share = 0.55
)",
                       "c.toml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->spread_ports);
  EXPECT_EQ(c->of_tier, "nic");
  EXPECT_DOUBLE_EQ(*c->max_ecmp_share, 0.55);
  auto bad = parse_check(R"([check]
measure = "run"
workload = "ar"
ports = "even"
[target]
max_stall_ms = 10
max_ecmp_share = 0
[[fault]]
at = "1s"
kind = "down"
link = "x"
)",
                         "c.toml");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().exit_code, kExitBadInput);
  EXPECT_NE(bad.error().message.find("c.toml:4:"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("ports"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("max_ecmp_share"), std::string::npos) << bad.error().message;
}

// max_control_p99_ms (exercise 8): a bench target on its own (min_busbw_fraction may then be
// left out), above 0, never for a run; without either a bench has no target.
TEST(ExerciseCheckSpec, ControlProbeTargetAloneOrWithBusbw) {
  auto c = parse_check(
      "[check]\nmeasure = \"bench\"\nworkload = \"job\"\nop = \"alltoall\"\n"
      "[target]\nmax_control_p99_ms = 40\n",
      "c.toml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_DOUBLE_EQ(*c->max_control_p99_ms, 40);
  EXPECT_FALSE(c->min_busbw_fraction.has_value());
  auto both = parse_check(
      "[check]\nmeasure = \"bench\"\nworkload = \"job\"\n[target]\nmin_busbw_fraction = "
      "0.5\nmax_control_p99_ms = 10\n",
      "c.toml");
  ASSERT_TRUE(both) << both.error().message;
  EXPECT_DOUBLE_EQ(*both->min_busbw_fraction, 0.5);
  auto zero = parse_check(
      "[check]\nmeasure = \"bench\"\nworkload = \"job\"\n[target]\nmax_control_p99_ms = 0\n",
      "c.toml");
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().message.find("c.toml:5:"), std::string::npos) << zero.error().message;
  EXPECT_NE(zero.error().message.find("max_control_p99_ms"), std::string::npos);
  auto none = parse_check(
      "[check]\nmeasure = \"bench\"\nworkload = \"job\"\n[target]\nof = \"rail\"\n", "c.toml");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("min_busbw_fraction"), std::string::npos)
      << none.error().message;
  auto run = parse_check(
      "[check]\nmeasure = \"run\"\nworkload = \"job\"\n[target]\nmax_gold_p99_ms = 10\n"
      "max_control_p99_ms = 10\n",
      "c.toml");
  ASSERT_FALSE(run);
  EXPECT_NE(run.error().message.find("c.toml:6:"), std::string::npos) << run.error().message;
  EXPECT_NE(run.error().message.find("max_control_p99_ms"), std::string::npos);
}

// rounds: odd (a majority must decide), bench only; 1 when absent.
TEST(ExerciseCheckSpec, RoundsAreOddAndForBenchOnly) {
  const std::string target = "[target]\nmin_busbw_fraction = 0.3\n";
  auto c = parse_check("[check]\nmeasure = \"bench\"\nworkload = \"j\"\nrounds = 3\n" + target,
                       "c.toml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->rounds, 3);
  auto one = parse_check("[check]\nmeasure = \"bench\"\nworkload = \"j\"\n" + target, "c.toml");
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one->rounds, 1);
  for (const char* bad_rounds : {"2", "0", "11"}) {
    auto b = parse_check(std::string("[check]\nmeasure = \"bench\"\nworkload = \"j\"\nrounds = ") +
                             bad_rounds + "\n" + target,
                         "c.toml");
    ASSERT_FALSE(b) << bad_rounds;
    EXPECT_EQ(b.error().exit_code, kExitBadInput);
    EXPECT_NE(b.error().message.find("c.toml:4:"), std::string::npos) << b.error().message;
    EXPECT_NE(b.error().message.find("rounds"), std::string::npos) << b.error().message;
  }
  auto run = parse_check(
      "[check]\nmeasure = \"run\"\nworkload = \"ar\"\nrounds = 3\n[target]\nmax_stall_ms = "
      "10\n[[fault]]\nat = \"1s\"\nkind = \"down\"\nlink = \"x\"\n",
      "c.toml");
  ASSERT_FALSE(run);
  EXPECT_NE(run.error().message.find("c.toml:4:"), std::string::npos) << run.error().message;
  EXPECT_NE(run.error().message.find("only for measure = \"bench\""), std::string::npos)
      << run.error().message;
}

TEST(ExerciseCheckSpec, ErrorsNameFileLineAndField) {
  auto c = parse_check(R"([check]
measure = "benchh"
workload = "job"
[target]
min_busbw_fraction = 2
mx_stall_ms = 3
)",
                       "c.toml");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().exit_code, kExitBadInput);
  const auto& m = c.error().message;
  EXPECT_NE(m.find("c.toml:2:"), std::string::npos) << m;
  EXPECT_NE(m.find("measure"), std::string::npos) << m;
  EXPECT_NE(m.find("bench"), std::string::npos) << m;      // the valid values
  EXPECT_NE(m.find("c.toml:6:"), std::string::npos) << m;  // the unknown key
}

TEST(ExerciseCheckSpec, RunNeedsFaultsAndATarget) {
  auto c = parse_check("[check]\nmeasure = \"run\"\nworkload = \"ar\"\n[target]\n", "c.toml");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("at least one of max_stall_ms"), std::string::npos)
      << c.error().message;
  EXPECT_NE(c.error().message.find("[[fault]]"), std::string::npos) << c.error().message;
  auto b = parse_check(
      "[check]\nmeasure = \"bench\"\nworkload = \"j\"\n[target]\nmin_busbw_fraction = "
      "0.5\n[[fault]]\nat = \"1s\"\n",
      "c.toml");
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("c.toml:6:"), std::string::npos) << b.error().message;
}

// Exercise 7's targets: the gold class's p99 and the checkpoint on time need no timeline; the
// stall, detection and recovery targets still do. settle: the run's length without faults.
TEST(ExerciseCheckSpec, GoldAndCheckpointTargetsNeedNoFault) {
  auto c = parse_check(R"([check]
measure = "run"
workload = "ckpt"
settle = "18s"
[target]
max_gold_p99_ms = 150
checkpoint_on_time = true
)",
                       "c.toml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_DOUBLE_EQ(*c->max_gold_p99_ms, 150);
  EXPECT_TRUE(c->checkpoint_on_time.value_or(false));
  EXPECT_EQ(c->settle_ms, 18000);
  EXPECT_TRUE(c->faults_text.empty());
  auto stall = parse_check(
      "[check]\nmeasure = \"run\"\nworkload = \"ar\"\n[target]\nmax_stall_ms = 10\n"
      "max_gold_p99_ms = 100\n",
      "c.toml");
  ASSERT_FALSE(stall);
  EXPECT_NE(stall.error().message.find("they need a timeline, at least one [[fault]]"),
            std::string::npos)
      << stall.error().message;
  auto bad = parse_check(R"([check]
measure = "run"
workload = "ckpt"
settle = "20m"
[target]
max_gold_p99_ms = 0
checkpoint_on_time = false
)",
                         "c.toml");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().exit_code, kExitBadInput);
  const auto& m = bad.error().message;
  EXPECT_NE(m.find("c.toml:4:"), std::string::npos) << m;  // settle: 100ms to 600s
  EXPECT_NE(m.find("settle"), std::string::npos) << m;
  EXPECT_NE(m.find("c.toml:6:"), std::string::npos) << m;  // max_gold_p99_ms: above 0
  EXPECT_NE(m.find("c.toml:7:"), std::string::npos) << m;  // checkpoint_on_time = false
  EXPECT_NE(m.find("false judges nothing"), std::string::npos) << m;
  auto bench = parse_check(
      "[check]\nmeasure = \"bench\"\nworkload = \"j\"\nsettle = \"5s\"\n[target]\n"
      "min_busbw_fraction = 0.5\nmax_gold_p99_ms = 100\n",
      "c.toml");
  ASSERT_FALSE(bench);
  EXPECT_NE(bench.error().message.find("c.toml:4:"), std::string::npos) << bench.error().message;
  EXPECT_NE(bench.error().message.find("c.toml:7:"), std::string::npos) << bench.error().message;
}

TEST(ExerciseCheckSpec, FaultsKeepTheirLines) {
  auto c = parse_check(R"([check]
measure = "run"
workload = "ar"
[target]
max_stall_ms = 10
[[fault]]
at = "1s"
kind = "link-down"
)",
                       "c.toml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->faults_text, "\n\n\n\n\n[[fault]]\nat = \"1s\"\nkind = \"link-down\"\n");
}

TEST(ExerciseCheckSpec, FileNeedsPairsOfTwoNodes) {
  auto c = parse_check(R"([check]
measure = "file"
file = "m.toml"
pairs = [["a/s0/g0"]]
workload = "x"
[target]
tolerance = 0.1
)",
                       "c.toml");
  ASSERT_FALSE(c);
  const auto& m = c.error().message;
  EXPECT_NE(m.find("c.toml:4:"), std::string::npos) << m;  // pairs
  EXPECT_NE(m.find("c.toml:5:"), std::string::npos) << m;  // workload: not for a file check
  auto ok = parse_check(
      "[check]\nmeasure = \"file\"\nfile = \"m.toml\"\npairs = [[\"a\", \"b\"]]\n[target]\n",
      "c.toml");
  ASSERT_TRUE(ok) << ok.error().message;
  ASSERT_EQ(ok->pairs.size(), 1u);
  EXPECT_DOUBLE_EQ(ok->tolerance, 0.15);
}

// A bench's miss is measured again as verify measures a class: once whatever the host showed,
// then only while it was bound; never a pass, never a miss the lab explains, 3 readings at most.
TEST(ExerciseBenchReadings, AMissTheLabDoesNotExplainIsReadAgain) {
  EXPECT_TRUE(bench_again(1, Verdict::kFail, true, false));
  EXPECT_TRUE(bench_again(1, Verdict::kNotJudged, true, true));
  EXPECT_FALSE(bench_again(2, Verdict::kFail, true, false));
  EXPECT_TRUE(bench_again(2, Verdict::kNotJudged, true, true));
  EXPECT_FALSE(bench_again(3, Verdict::kNotJudged, true, true));
  EXPECT_FALSE(bench_again(1, Verdict::kPass, true, true));
  EXPECT_FALSE(bench_again(1, Verdict::kFail, false, false));
  EXPECT_FALSE(bench_again(1, Verdict::kFail, false, true));
}

TEST(ExerciseTask, HintsInOrder) {
  Exercise ex;
  ASSERT_TRUE(parse_task("# T\nstory\n## Goal\ng\n## Hint 1\none\n## Hint 2\ntwo\n", "t.md", ex));
  EXPECT_EQ(ex.title, "T");
  ASSERT_EQ(ex.hints.size(), 2u);
  EXPECT_EQ(ex.hints[0].title, "Hint 1");
  EXPECT_EQ(ex.hints[1].text, "two\n");
  EXPECT_EQ(ex.sheet.find("Hint"), std::string::npos);
  Exercise none;
  auto r = parse_task("# T\nno hints\n", "t.md", none);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("t.md:2:1"), std::string::npos) << r.error().message;
}

// Every shipped exercise loads, its scenario too, and a run check's scenario with the faults.
TEST(ShippedExercises, LoadWhole) {
  auto all = list_exercises(std::string(TB_SOURCE_DIR) + "/exercises");
  ASSERT_TRUE(all) << all.error().message;
  ASSERT_GE(all->size(), 3u);
  for (const auto& ex : *all) {
    SCOPED_TRACE(ex.id);
    EXPECT_GE(ex.hints.size(), 2u);
    auto s = scenario::load(ex.scenario_path());
    ASSERT_TRUE(s) << s.error().message;
    if (ex.check.measure == Measure::kFile) {
      EXPECT_FALSE(ex.check.pairs.empty());
      continue;
    }
    bool found = false;
    for (const auto& w : s->workloads) found = found || w.name == ex.check.workload;
    EXPECT_TRUE(found) << "check.toml's workload is not in scenario.toml";
    if (ex.check.measure != Measure::kRun) continue;
    auto text = slurp(ex.scenario_path());
    auto r = run_scenario_of(ex, text, ex.scenario_path());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->faults.empty(), ex.check.faults_text.empty());
    // The targets became the run's [expect].
    EXPECT_EQ(r->expect.max_gold_p99_ms, ex.check.max_gold_p99_ms);
    EXPECT_EQ(r->expect.checkpoint_on_time, ex.check.checkpoint_on_time);
  }
}

// Exercise 7: the checkpoint's size and cadence are the requirement; the fix is how it is sent.
TEST(ShippedExercises, CheckpointSizeAndCadenceArePinned) {
  auto ex = load_exercise(std::string(TB_SOURCE_DIR) + "/exercises/07-checkpoint-floods-wan");
  ASSERT_TRUE(ex) << ex.error().message;
  const std::string start = slurp(ex->scenario_path());
  // The reference solution's kind of change loads.
  std::string fixed = start;
  const auto mode = fixed.find("mode = \"full\"");
  ASSERT_NE(mode, std::string::npos);
  fixed.replace(mode, 13, "mode = \"incremental\"");
  auto ok = run_scenario_of(*ex, fixed, "copy.toml");
  ASSERT_TRUE(ok) << ok.error().message;
  // A longer cadence is refused, naming the key and the starting value.
  std::string slower = start;
  const auto every = slower.find("every = ");
  ASSERT_NE(every, std::string::npos);
  slower.replace(every, slower.find('\n', every) - every, "every = \"60s\"");
  auto r = run_scenario_of(*ex, slower, "copy.toml");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().exit_code, kExitBadInput);
  EXPECT_NE(r.error().message.find("copy.toml:"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("every: changed"), std::string::npos) << r.error().message;
  // Without the checkpoint there is nothing to judge: refused too.
  std::string gone = start;
  gone.replace(gone.find("name = \"ckpt\""), 13, "name = \"other\"");
  EXPECT_FALSE(run_scenario_of(*ex, gone, "copy.toml"));
}

// A dual-ToR copy of exercise 5: the fault's "dc/tor0" becomes the first ToR, tor0a.
TEST(ShippedExercises, DualTorRenamesTheFaultsToR) {
  auto ex = load_exercise(std::string(TB_SOURCE_DIR) + "/exercises/05-dual-tor");
  ASSERT_TRUE(ex) << ex.error().message;
  std::string text = slurp(ex->scenario_path());
  const auto p = text.find("dual_tor = false");
  ASSERT_NE(p, std::string::npos);
  text.replace(p, 16, "dual_tor = true ");
  auto r = run_scenario_of(*ex, text, "copy.toml");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->faults.size(), 1u);
  EXPECT_EQ(r->faults[0].b, "dc/tor0a");
}

TEST(ShippedExercises, ACopyWithItsOwnFaultIsRefused) {
  auto ex = load_exercise(std::string(TB_SOURCE_DIR) + "/exercises/05-dual-tor");
  ASSERT_TRUE(ex) << ex.error().message;
  std::string text = slurp(ex->scenario_path()) +
                     "\n[[fault]]\nat = \"1s\"\nkind = \"link-down\"\na = \"dc/s0/g0\"\nb = "
                     "\"dc/tor0\"\n";
  auto r = run_scenario_of(*ex, text, "copy.toml");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().exit_code, kExitBadInput);
  EXPECT_NE(r.error().message.find("copy.toml:"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("the timeline is the checker's"), std::string::npos);
}

TEST(ShippedExercises, FindByNumberOrId) {
  const std::string root = std::string(TB_SOURCE_DIR) + "/exercises";
  auto a = find_exercise(root, "2");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->id, "02-wrong-nic");
  auto b = find_exercise(root, "02-wrong-nic");
  ASSERT_TRUE(b);
  auto c = find_exercise(root, "99");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().exit_code, kExitBadInput);
  EXPECT_NE(c.error().message.find("2 (02-wrong-nic)"), std::string::npos) << c.error().message;
}

}  // namespace
}  // namespace tb::exercise
