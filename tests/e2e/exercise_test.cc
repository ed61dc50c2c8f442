// `testbedctl exercise` end to end (issue #18): for each exercise, `check` fails on the
// starting state naming what is wrong in measured terms and passes after the reference
// solution (tests/exercises/<id>/solution.sh, applied to the student's copy); hints come one at
// a time; `reset` and `stop` leave nothing behind; two students on the same exercise get their
// own verdicts. Exercise state goes to a directory of this test process's own.
//
// Under a CPU hog a correct fix may be "NOT JUDGED" (exit 2: the host was too busy to measure
// the lab); that is accepted for a pass only, and only with the host-bound evidence printed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "e2e_util.h"

namespace tb::e2e {
namespace {

class ExerciseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!is_root()) GTEST_SKIP() << "needs root";
    state_ = "/tmp/tb-exercise-test-" + std::to_string(::getpid());
    std::filesystem::create_directories(state_);
  }
  void TearDown() override {
    for (const auto& [n, lab] : started_) ex("stop " + n + " --name " + lab);
    std::error_code ec;
    std::filesystem::remove_all(state_, ec);
  }
  CmdResult ex(const std::string& args) {
    return sh("TESTBEDCTL_EXERCISE_STATE=" + state_ + " " + tbctl() + " exercise " + args);
  }
  std::string start(const std::string& n, const std::string& prefix) {
    const std::string lab = unique_lab(prefix);
    started_.emplace_back(n, lab);
    CmdResult r = ex("start " + n + " --name " + lab);
    EXPECT_EQ(r.rc, 0) << r.out;
    return lab;
  }
  std::string copy(const std::string& lab) { return state_ + "/" + lab + "/scenario.toml"; }
  void solve(const std::string& id, const std::string& lab) {
    CmdResult r =
        sh(std::string(TB_SOURCE_DIR) + "/tests/exercises/" + id + "/solution.sh " + copy(lab));
    ASSERT_EQ(r.rc, 0) << r.out;
  }
  // A pass, or a pass the host was too busy to judge (never a FAIL).
  static void expect_pass(const CmdResult& r) {
    if (r.rc == 2 && r.out.find("NOT JUDGED") != std::string::npos) {
      EXPECT_NE(r.out.find("(host-bound)"), std::string::npos) << r.out;
      return;
    }
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find(": PASS"), std::string::npos) << r.out;
  }
  std::string state_;
  std::vector<std::pair<std::string, std::string>> started_;
};

TEST_F(ExerciseTest, ListShowsTheExercises) {
  CmdResult r = ex("list");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("01-three-tiers"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("02-wrong-nic"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("03-untuned-collectives"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("04-ecmp-polarisation"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("05-dual-tor"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("06-gray-failure"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("07-checkpoint-floods-wan"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("08-wrong-nic-pause"), std::string::npos) << r.out;
  CmdResult bad = ex("hint 99 --name exnone");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_NE(bad.out.find("no such exercise"), std::string::npos) << bad.out;
}

// Exercise 2 for two students at once: one fixes the tier, one does not; each check judges its
// own lab. Then hints, reset and stop.
TEST_F(ExerciseTest, WrongNicTwoStudentsHintsResetStop) {
  const std::string a = start("2", "exa"), b = start("2", "exb");
  {
    CmdResult r = ex("check 2 --name " + a);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find(": FAIL"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("crossed the frontend"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("next hint (Hint 1)"), std::string::npos) << r.out;
  }
  solve("02-wrong-nic", a);
  // Both checks at once.
  const std::string fa = state_ + "/a.out", fb = state_ + "/b.out";
  CmdResult both =
      sh("(TESTBEDCTL_EXERCISE_STATE=" + state_ + " " + tbctl() + " exercise check 2 --name " + a +
         " > " + fa + " 2>&1; echo rc=$? >> " + fa + ") & (TESTBEDCTL_EXERCISE_STATE=" + state_ +
         " " + tbctl() + " exercise check 2 --name " + b + " > " + fb + " 2>&1; echo rc=$? >> " +
         fb + ") & wait");
  auto read = [](const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string out_a = read(fa), out_b = read(fb);
  CmdResult ra{out_a.find("rc=0") != std::string::npos   ? 0
               : out_a.find("rc=2") != std::string::npos ? 2
                                                         : 1,
               out_a};
  expect_pass(ra);
  EXPECT_NE(out_b.find(": FAIL"), std::string::npos) << out_b;
  EXPECT_NE(out_b.find("rc=1"), std::string::npos) << out_b;

  // Hints one at a time (the failed check showed Hint 1 of b).
  CmdResult h = ex("hint 2 --name " + b);
  EXPECT_EQ(h.rc, 0) << h.out;
  EXPECT_NE(h.out.find("Hint 2 of 3"), std::string::npos) << h.out;
  h = ex("hint 2 --name " + b);
  EXPECT_NE(h.out.find("Hint 3 of 3"), std::string::npos) << h.out;
  h = ex("hint 2 --name " + b);
  EXPECT_NE(h.out.find("all 3 hints are shown"), std::string::npos) << h.out;

  // reset: a's copy is the starting one again and its check fails again.
  CmdResult r = ex("reset 2 --name " + a);
  ASSERT_EQ(r.rc, 0) << r.out;
  CmdResult g = sh("grep -c '^tier = \"frontend\"' " + copy(a));
  EXPECT_EQ(g.out, "1\n") << g.out;
  r = ex("check 2 --name " + a);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("next hint (Hint 1)"), std::string::npos) << r.out;  // hints cleared

  // stop: nothing left of either lab.
  for (const auto& lab : {a, b}) {
    r = ex("stop 2 --name " + lab);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(marked_netns(lab).empty()) << lab;
    EXPECT_FALSE(std::filesystem::exists(state_ + "/" + lab));
    EXPECT_FALSE(std::filesystem::exists("/run/testbedctl/" + lab));
  }
  started_.clear();
}

// Exercise 1: the student's measurements file against the lab's own figures.
TEST_F(ExerciseTest, ThreeTiers) {
  const std::string lab = start("1", "ext");
  CmdResult r = ex("check 1 --name " + lab);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("hz/s0/g0 <-> hz/s1/g0: no tier given"), std::string::npos) << r.out;
  solve("01-three-tiers", lab);
  r = ex("check 1 --name " + lab);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find(": PASS"), std::string::npos) << r.out;
  // One wrong tier is named, in the lab's terms, without giving the answer away.
  ASSERT_EQ(
      sh("sed -i 's/tier = \"rail\"/tier = \"nvl\"/' " + state_ + "/" + lab + "/measurements.toml")
          .rc,
      0);
  r = ex("check 1 --name " + lab);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("hz/s0/g0 <-> hz/s1/g0: tier nvl is not the network this pair talks over"),
            std::string::npos)
      << r.out;
}

// Exercise 3: one channel per peer uses one of the NIC's two ports (at most half the NIC,
// which the lab explains: FAIL even on a busy host); two channels, bound one per port, pass the
// 0.8 target in one round on the lossless rails. (Three channels load one port with two of the
// three stripes: at most 0.75 of the NIC, below the target.)
TEST_F(ExerciseTest, UntunedCollectives) {
  const std::string lab = start("3", "ex2u");
  CmdResult r = ex("check 3 --name " + lab);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(": FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 channel(s) bound to the NIC's 2 ports in turn: the busiest port "
                       "carries 1 of them"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("cannot carry the target"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("round(s)"), std::string::npos) << "one round decides: " << r.out;
  ASSERT_EQ(ex("reset 3 --name " + lab).rc, 0);
  solve("03-untuned-collectives", lab);
  expect_pass(ex("check 3 --name " + lab));
}

// Exercise 4: with l3 hashing every flow of the pair takes one uplink per ToR (a deterministic
// FAIL, from the interface counters); l4 with 16 channels spreads them (one round decides: a
// bad draw is under 1e-5, and 20 of 20 checks passed: docs/exercises.md).
TEST_F(ExerciseTest, EcmpPolarisation) {
  const std::string lab = start("4", "ex2e");
  CmdResult r = ex("check 4 --name " + lab);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(": FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dc/tor0 sent"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the uplinks are not balanced within 0.80"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("round(s)"), std::string::npos) << "one round decides: " << r.out;
  // Not checked here (it was, 15-20 s of the suite): more channels under l3 failing alike. A
  // ToR has one address pair to hash under l3, so the channels cannot change its uplink.
  solve("04-ecmp-polarisation", lab);
  r = ex("start 4 --name " + lab);
  ASSERT_EQ(r.rc, 0) << r.out;
  expect_pass(ex("check 4 --name " + lab));
}

// Exercise 5: a rail flap stalls a single-ToR job; dual-ToR rides through it.
TEST_F(ExerciseTest, DualTor) {
  const std::string lab = start("5", "exd");
  CmdResult r = ex("check 5 --name " + lab);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(": FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the workload stalled"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("probes on its path lost"), std::string::npos) << r.out;
  solve("05-dual-tor", lab);
  r = ex("start 5 --name " + lab);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("rebuilt"), std::string::npos) << r.out;
  expect_pass(ex("check 5 --name " + lab));
}

// Exercise 6: link state never sees a blackhole; the failover agent does, within 100 ms.
TEST_F(ExerciseTest, GrayFailure) {
  const std::string lab = start("6", "exg");
  CmdResult r = ex("check 6 --name " + lab);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("nothing in the control plane reacted"), std::string::npos) << r.out;
  solve("06-gray-failure", lab);
  r = ex("start 6 --name " + lab);
  ASSERT_EQ(r.rc, 0) << r.out;
  expect_pass(ex("check 6 --name " + lab));
}

// Exercise 7: a full, unclassified checkpoint every 4 s on a 1 Mbit/s WAN without QoS classes:
// the gold probe waits behind it and every replication after the seed is late (FAIL on any host:
// the lab explains both). QoS on (rebuild), the checkpoint bronze and incremental: PASS. A copy
// that checkpoints less often is refused; stop leaves nothing behind.
TEST_F(ExerciseTest, CheckpointFloodsWan) {
  const std::string lab = start("7", "exk");
  CmdResult r = ex("check 7 --name " + lab);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(": FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("max_gold_p99_ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gold probe: p50 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[qos] is off: gold waits in the WAN link's one queue"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("replication(s) after the seed late: replication 1 ("), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("after the next was due"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("next hint (Hint 1)"), std::string::npos) << r.out;
  // The cadence is the requirement, not the fix.
  ASSERT_EQ(sh("sed -i 's/^every = \"4s\"/every = \"60s\"/' " + copy(lab)).rc, 0);
  r = ex("check 7 --name " + lab);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("every: changed"), std::string::npos) << r.out;
  ASSERT_EQ(ex("reset 7 --name " + lab).rc, 0);
  solve("07-checkpoint-floods-wan", lab);
  r = ex("start 7 --name " + lab);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("rebuilt"), std::string::npos) << r.out;
  expect_pass(ex("check 7 --name " + lab));
  r = ex("stop 7 --name " + lab);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(marked_netns(lab).empty()) << lab;
  EXPECT_FALSE(std::filesystem::exists(state_ + "/" + lab));
  started_.clear();
}

// Exercise 8: the job's AlltoAll on a lossless VPC; the VPC's ports pause the servers' frontend
// queues and the control probes wait behind the paused backlog (measured 90-204 ms p99 against
// the 40 ms target); on the rail they read 5-8 ms.
TEST_F(ExerciseTest, WrongNicPause) {
  const std::string lab = start("8", "ex8p");
  CmdResult r = ex("check 8 --name " + lab);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(": FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("control p99"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PFC backpressure from the VPC's congested ports"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("the VPC's ports paused the frontend queues"), std::string::npos) << r.out;
  solve("08-wrong-nic-pause", lab);
  expect_pass(ex("check 8 --name " + lab));
}

}  // namespace
}  // namespace tb::e2e
