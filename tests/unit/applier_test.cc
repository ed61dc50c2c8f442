// Applier: journal and rollback against the recording fake kernel.
#include <gtest/gtest.h>

#include <filesystem>

#include "apply/applier.h"
#include "recording_kernel.h"

namespace tb::apply {
namespace {

plan::Plan small_plan() {
  plan::Plan p;
  p.lab = "t";
  p.ops = {
      plan::CreateNetns{"tb-t-a", "a", "testbedctl lab=t node=a"},
      plan::CreateNetns{"tb-t-b", "b", "testbedctl lab=t node=b"},
      plan::CreateVeth{{"tb-t-a", "x", "al", ""}, {"tb-t-b", "y", "bl", ""}, 1500},
      plan::AddAddr{"tb-t-a", "x", *parse_prefix("198.18.0.0/31")},
      plan::AddAddr{"tb-t-b", "y", *parse_prefix("198.18.0.1/31")},
      plan::WriteHosts{"tb-t-a", "# testbedctl lab=t netns=tb-t-a\n"},
  };
  return p;
}

class ApplierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tb-applier-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string journal_path() const { return (dir_ / "journal.jsonl").string(); }
  std::filesystem::path dir_;
};

TEST_F(ApplierTest, AppliesEverythingAndJournalsIt) {
  RecordingKernel k;
  auto j = Journal::create(journal_path());
  ASSERT_TRUE(j);
  auto p = small_plan();
  ASSERT_TRUE(apply_plan(p, k, *j));
  auto back = Journal::read(journal_path());
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->size(), p.ops.size());
  for (size_t i = 0; i + 1 < p.ops.size(); ++i)
    EXPECT_EQ(plan::to_text((*back)[i]), plan::to_text(p.ops[i]));
  EXPECT_EQ(k.live().size(), 7u);  // 2 netns, 2 veth ends, 2 addrs, 1 hosts file
}

TEST_F(ApplierTest, FailureAtEveryStepRollsBackToNothing) {
  const auto p = small_plan();
  for (bool at_sync : {false, true})
    for (int n = 0; n < static_cast<int>(p.ops.size()); ++n) {
      RecordingKernel k;
      k.fail_at = n;
      k.fail_at_sync = at_sync;
      auto j = Journal::create(journal_path());
      ASSERT_TRUE(j);
      auto r = apply_plan(p, k, *j);
      ASSERT_FALSE(r) << "step " << n;
      EXPECT_NE(r.error().message.find("File exists"), std::string::npos);
      EXPECT_NE(r.error().message.find("everything made so far was removed"), std::string::npos);
      EXPECT_TRUE(k.live().empty()) << "step " << n << " left " << *k.live().begin();
    }
}

TEST_F(ApplierTest, InterruptRollsBack) {
  RecordingKernel k;
  std::atomic<bool> stop{false};
  ApplyOptions o;
  o.interrupted = &stop;
  o.progress = [&](size_t, size_t) { stop = true; };
  auto j = Journal::create(journal_path());
  auto r = apply_plan(small_plan(), k, *j, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("interrupted"), std::string::npos);
  EXPECT_TRUE(k.live().empty());
}

TEST_F(ApplierTest, TeardownSkipsWhatNamespacesTakeWithThem) {
  RecordingKernel k;
  auto j = Journal::create(journal_path());
  auto p = small_plan();
  ASSERT_TRUE(apply_plan(p, k, *j));
  k.calls.clear();
  ASSERT_TRUE(teardown(p.ops, k));
  EXPECT_TRUE(k.live().empty());
  // hosts, netns b, netns a: in reverse, nothing else
  ASSERT_EQ(k.calls.size(), 3u);
  EXPECT_TRUE(k.calls[0].starts_with("undo hosts"));
  EXPECT_TRUE(k.calls[1].starts_with("undo netns  tb-t-b"));
}

TEST_F(ApplierTest, TornJournalLineIsIgnored) {
  {
    auto j = Journal::create(journal_path());
    j->append(small_plan().ops[0]);
    ASSERT_TRUE(j->flush());
  }
  FILE* f = std::fopen(journal_path().c_str(), "a");
  std::fputs("{\"op\":\"netns\",\"net", f);
  std::fclose(f);
  auto back = Journal::read(journal_path());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->size(), 1u);
}

TEST_F(ApplierTest, TeardownUndoesDaemonsAndRxeDevicesEvenInsideItsNamespaces) {
  // Both live inside a namespace the plan makes, yet neither goes with it: a process outlives its
  // namespace and an rxe device's name is global (and must go before its netdev).
  auto p = small_plan();
  p.ops.push_back(plan::CreateRxe{"tb-t-a", "x", "a", "tb-t-a-x", *parse_ipv4("198.18.0.0")});
  p.ops.push_back(plan::StartDaemon{"tb-t-a", plan::Stage{"tb-t-a", "a", {}}});
  RecordingKernel k;
  auto j = Journal::create(journal_path());
  ASSERT_TRUE(j);
  ASSERT_TRUE(apply_plan(p, k, *j));
  k.calls.clear();
  ASSERT_TRUE(teardown(j->ops(), k));
  ASSERT_GE(k.calls.size(), 3u);
  EXPECT_EQ(k.calls[0], "undo " + plan::to_text(p.ops.back()));             // the daemon first
  EXPECT_EQ(k.calls[1], "undo " + plan::to_text(p.ops[p.ops.size() - 2]));  // then the device
  for (const auto& c : k.calls) EXPECT_EQ(c.find("undo addr"), std::string::npos) << c;
}

}  // namespace
}  // namespace tb::apply
