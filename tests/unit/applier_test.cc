// Applier: journal and rollback against the recording fake kernel.
#include <gtest/gtest.h>

#include <filesystem>
#include <unordered_set>

#include "apply/applier.h"
#include "plan/shaping.h"
#include "recording_kernel.h"
#include "scenario/loader.h"

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

// read_for_teardown (down's reading) leaves out, without parsing them, exactly the lines
// teardown skips (goes_with_a_namespace): on hz-bj's shaped plan every op it returns is read()'s
// minus those inside a namespace the journal creates, in order. Lines laid out otherwise are kept.
TEST_F(ApplierTest, ReadForTeardownLeavesOutExactlyWhatTeardownSkips) {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/hz-bj.toml");
  ASSERT_TRUE(s) << s.error().message;
  auto p = plan::compile(*s);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_TRUE(plan::add_shaping(*p, "tbf"));
  // Hand-made lines: a veth between namespaces the journal does not create, and an address
  // whose namespace name has an escape in it (neither may be left out).
  p->ops.push_back(plan::CreateVeth{{"elsewhere", "x9", "a", ""}, {"other", "y9", "b", ""}, 1500});
  p->ops.push_back(plan::AddAddr{"tb-\"odd", "x", *parse_prefix("198.18.0.0/31")});
  auto j = Journal::create(journal_path());
  ASSERT_TRUE(j);
  for (const auto& op : p->ops) j->append(op);
  ASSERT_TRUE(j->flush());
  auto all = Journal::read(journal_path());
  auto fast = Journal::read_for_teardown(journal_path());
  ASSERT_TRUE(all) << all.error().message;
  ASSERT_TRUE(fast) << fast.error().message;
  std::unordered_set<std::string> created;
  for (const auto& op : *all)
    if (const auto* n = std::get_if<plan::CreateNetns>(&op)) created.insert(n->netns);
  std::vector<std::string> want, got;
  size_t kinds_inside = 0;
  for (const auto& op : *all) {
    const bool inside = goes_with_a_namespace(op, created);
    kinds_inside += inside;
    if (!inside) want.push_back(plan::to_text(op));
  }
  for (const auto& op : *fast) got.push_back(plan::to_text(op));
  EXPECT_EQ(got, want);
  EXPECT_GT(kinds_inside, all->size() / 2) << "most of a lab's ops are inside its namespaces";
  ASSERT_GE(got.size(), 2u);
  EXPECT_NE(got[got.size() - 2].find("x9"), std::string::npos) << got[got.size() - 2];
  EXPECT_NE(got.back().find("odd"), std::string::npos) << got.back();
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
