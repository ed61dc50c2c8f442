// The checkpoint workload's data side without root: the changed-block bookkeeping (which blocks a
// replication changes and sends in each mode, the versions they reach, deterministic content),
// the scenario keys, and real replications over loopback TCP to a receiver in this process —
// byte-exact in every mode, and a receiver that missed a replication fails the checksum.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "probe/checkpoint.h"
#include "scenario/loader.h"
#include "scenario_text.h"

namespace tb::probe {
namespace {

const CkptShard kShard{1'000'000, 4096, 7};  // 245 blocks, the last 576 bytes

TEST(CkptBlocks, ChangedBlocksAreADeterministicFractionOfDistinctBlocks) {
  EXPECT_EQ(block_count(kShard), 245u);
  EXPECT_EQ(block_len(kShard, 0), 4096u);
  EXPECT_EQ(block_len(kShard, 244), 1'000'000u - 244 * 4096);
  EXPECT_TRUE(changed_blocks(kShard, 0.1, 0).empty());  // the first checkpoint changes nothing
  const auto c1 = changed_blocks(kShard, 0.1, 1);
  EXPECT_EQ(c1.size(), 25u);  // round(0.1 x 245) = 24.5 -> 25
  EXPECT_TRUE(std::is_sorted(c1.begin(), c1.end()));
  EXPECT_EQ(std::set<uint64_t>(c1.begin(), c1.end()).size(), c1.size());
  EXPECT_LT(c1.back(), 245u);
  EXPECT_EQ(changed_blocks(kShard, 0.1, 1), c1);          // same (seed, rep), same blocks
  EXPECT_NE(changed_blocks(kShard, 0.1, 2), c1);          // another replication, others
  EXPECT_EQ(changed_blocks(kShard, 1e-9, 3).size(), 1u);  // at least one
  EXPECT_EQ(changed_blocks(kShard, 1.0, 3).size(), 245u);
  CkptShard other = kShard;
  other.seed = 8;
  EXPECT_NE(changed_blocks(other, 0.1, 1), c1);
}

TEST(CkptBlocks, VersionsCountTheReplicationsThatChangedEachBlock) {
  const auto v0 = versions_at(kShard, 0.1, 0);
  EXPECT_EQ(v0, std::vector<uint32_t>(245, 0));
  auto v3 = versions_at(kShard, 0.1, 3);
  std::vector<uint32_t> want(245, 0);
  for (int r = 1; r <= 3; ++r)
    for (uint64_t b : changed_blocks(kShard, 0.1, r)) ++want[b];
  EXPECT_EQ(v3, want);
  uint64_t total = 0;
  for (uint32_t x : v3) total += x;
  EXPECT_EQ(total, 3u * 25);
  // Content is a function of (seed, block, version): a changed block's bytes differ.
  std::vector<uint8_t> a(4096), b(4096), c(4096);
  fill_block(kShard, 5, 0, a);
  fill_block(kShard, 5, 1, b);
  fill_block(kShard, 5, 0, c);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, c);
  EXPECT_NE(shard_checksum(kShard, v0), shard_checksum(kShard, v3));
}

TEST(CkptBlocks, EachModeSendsWhatItShould) {
  // full: everything, every time.
  for (int r : {0, 1, 5}) {
    EXPECT_TRUE(sends_full(CkptMode::kFull, r, 4));
    EXPECT_EQ(blocks_to_send(kShard, CkptMode::kFull, 0.1, 4, r).size(), 245u);
  }
  // incremental: the first is full, then only the changed blocks.
  EXPECT_TRUE(sends_full(CkptMode::kIncremental, 0, 4));
  EXPECT_FALSE(sends_full(CkptMode::kIncremental, 4, 4));
  EXPECT_EQ(blocks_to_send(kShard, CkptMode::kIncremental, 0.1, 4, 2),
            changed_blocks(kShard, 0.1, 2));
  // layered: full at 0, 4, 8; incremental in between.
  std::vector<bool> full;
  for (int r = 0; r < 9; ++r) full.push_back(sends_full(CkptMode::kLayered, r, 4));
  EXPECT_EQ(full, (std::vector<bool>{true, false, false, false, true, false, false, false, true}));
  EXPECT_EQ(*parse_ckpt_mode("layered"), CkptMode::kLayered);
  EXPECT_FALSE(parse_ckpt_mode("diff"));
}

// A receiver on loopback in this process, and replications to it.
class CkptLoopback : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tb-ckpt-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    // Below the ephemeral range (multihost_session_test.cc test_port says why).
    port_ = static_cast<uint16_t>(26000 + ::getpid() % 6000);
    server_ = std::thread([this] {
      CkptServeOptions o{port_, dir_.string(), 8, 60};
      auto r = serve_ckpt(o, stop_, [this](const nlohmann::json& j) {
        if (j.value("event", "") == "ready") ready_ = true;
        if (j.value("event", "") == "error") errors_.push_back(j.dump());
      });
      if (!r) errors_.push_back(r.error().message);
      ready_ = true;
    });
    for (int i = 0; i < 500 && !ready_; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  void TearDown() override {
    stop_ = true;
    server_.join();
    std::filesystem::remove_all(dir_);
    EXPECT_TRUE(errors_.empty()) << errors_.front();
  }
  CkptSendOptions send(CkptMode m, int rep, uint32_t shard = 0) {
    CkptSendOptions o;
    o.to = "127.0.0.1";
    o.port = port_;
    o.shard = shard;
    o.data = kShard;
    o.mode = m;
    o.changed = 0.1;
    o.full_every = 3;
    o.rep = rep;
    o.streams = 3;
    o.dscp = 8;
    o.timeout_ms = 30'000;
    return o;
  }
  std::filesystem::path dir_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false}, ready_{false};
  std::thread server_;
  std::vector<std::string> errors_;
};

TEST_F(CkptLoopback, EveryModeReplicatesByteExact) {
  uint32_t shard = 0;
  for (CkptMode m : {CkptMode::kFull, CkptMode::kIncremental, CkptMode::kLayered}) {
    for (int rep = 0; rep < 5; ++rep) {
      auto r = run_ckpt_send(send(m, rep, shard));
      ASSERT_TRUE(r) << r.error().message;
      EXPECT_TRUE(r->ok()) << to_string(m) << " rep " << rep;
      EXPECT_EQ(r->checksum, shard_checksum(kShard, versions_at(kShard, 0.1, rep)));
      EXPECT_EQ(r->receiver_bytes, kShard.bytes);
      const bool full = sends_full(m, rep, 3);
      EXPECT_EQ(r->full, full);
      EXPECT_EQ(
          r->payload, full ? kShard.bytes : [&] {
            uint64_t n = 0;
            for (uint64_t b : changed_blocks(kShard, 0.1, rep)) n += block_len(kShard, b);
            return n;
          }());
      EXPECT_GT(r->wire, r->payload);
    }
    // The file the receiver rebuilt is the sender's shard at the last replication.
    std::ifstream in(dir_ / ("shard-" + std::to_string(shard) + ".bin"), std::ios::binary);
    std::vector<uint8_t> got((std::istreambuf_iterator<char>(in)), {});
    Checksum c;
    c.add(got);
    EXPECT_EQ(c.value(), shard_checksum(kShard, versions_at(kShard, 0.1, 4)));
    ++shard;
  }
}

TEST_F(CkptLoopback, AReceiverThatMissedAReplicationFailsTheChecksum) {
  ASSERT_TRUE(run_ckpt_send(send(CkptMode::kIncremental, 0)));
  // Replication 1 never arrives; 2 sends only its own changes.
  auto r = run_ckpt_send(send(CkptMode::kIncremental, 2));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->ok());
  EXPECT_NE(r->checksum, r->receiver_checksum);
  auto j = to_json(send(CkptMode::kIncremental, 2), *r);
  EXPECT_FALSE(j["ok"].get<bool>());
}

}  // namespace
}  // namespace tb::probe

namespace tb::scenario {
namespace {

using testing_text::kHead;
using testing_text::load_error;

const char* kTwoRegions = R"(
[[region]]
name = "bj"
servers = 1
gpus_per_server = 1
scale_up = "nvlink"
rail = "hpn"
frontend = "vpc"
)";

TEST(CkptScenario, LoadsModeCadenceAndStreams) {
  auto s = load_text(std::string(kHead) + kTwoRegions + R"(
[[workload]]
name = "ck"
kind = "checkpoint"
from = "hz"
to = "bj"
bytes = "1G"
qos = "bronze"
mode = "layered"
changed = "5%"
full_every = 3
every = "2s"
streams = 4
block = "64K"

[[workload]]
name = "ck2"
kind = "checkpoint"
from = "bj"
to = "hz"
bytes = "1M"
every = 10
)",
                     "x.toml");
  ASSERT_TRUE(s) << s.error().message;
  const auto& w = s->workloads[0];
  EXPECT_EQ(w.mode, "layered");
  EXPECT_DOUBLE_EQ(w.changed, 0.05);
  EXPECT_EQ(w.full_every, 3);
  EXPECT_EQ(w.every.ns, 2'000'000'000);
  EXPECT_EQ(w.every_steps, 0);
  EXPECT_EQ(w.streams, 4);
  EXPECT_EQ(w.block, 65536u);
  const auto& w2 = s->workloads[1];
  EXPECT_EQ(w2.mode, "full");
  EXPECT_EQ(w2.every_steps, 10);
  EXPECT_EQ(w2.streams, 1);
}

TEST(CkptScenario, EachBadFieldIsNamedAtItsPlace) {
  const std::string m = load_error(std::string(kHead) + kTwoRegions + R"(
[[workload]]
name = "ck"
kind = "checkpoint"
from = "hz"
to = "bj"
bytes = "1G"
mode = "diff"
changed = "5%"
full_every = 1
every = "10ms"
streams = 65
block = 100
)");
  EXPECT_HAS(m, "x.toml:26:8: workload \"ck\": mode:");
  EXPECT_HAS(m, "workload \"ck\": changed: only for mode = \"incremental\" or \"layered\"");
  EXPECT_HAS(m, "x.toml:28:14: workload \"ck\": full_every:");
  EXPECT_HAS(m, "x.toml:29:9: workload \"ck\": every: must be 100ms..24h");
  EXPECT_HAS(m, "x.toml:30:11: workload \"ck\": streams:");
  EXPECT_HAS(m, "x.toml:31:9: workload \"ck\": block: must be 512 bytes..64M");
}

}  // namespace
}  // namespace tb::scenario
