// bench's own limit (launch::IdleWatch): a run is cut only when no rank wrote a line and no rank
// moved a byte (the progress board) for the limit, so a slow but progressing size is not cut.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "collective/progress.h"
#include "launch/bench_run.h"
#include "temp_dir.h"

namespace tb {
namespace {

using launch::IdleWatch;
using Clock = IdleWatch::Clock;
using namespace std::chrono_literals;

int64_t mono_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

TEST(BenchIdleWatch, ASlowButProgressingRunIsNotCut) {
  testing_util::TempDir dir;
  const std::string path = dir.path() + "/run.progress";
  IdleWatch idle(1000ms, path, 4);  // the watcher may open the board before the ranks
  auto rank = collective::ProgressBoard::open(path, 2, 4);
  ASSERT_TRUE(rank) << rank.error().message;
  // No line for 3 limits, but rank 2 moves bytes all along: never expired.
  const auto t0 = Clock::now();
  auto last_note = t0;
  bool cut = false;
  while (Clock::now() - t0 < 3s && !cut) {
    last_note = Clock::now();
    (*rank)->note(mono_ns(last_note));
    cut = idle.expired();
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_FALSE(cut);
  // Once nothing moves, the limit runs out, counted from the last byte moved (not from here:
  // the loop above slept up to 10 ms after its last note).
  const auto stopped = Clock::now();
  while (!idle.expired() && Clock::now() - stopped < 10s) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(idle.expired());
  EXPECT_GE(Clock::now() - last_note, 1000ms);
}

TEST(BenchIdleWatch, WithoutABoardRankLinesAloneKeepItAlive) {
  IdleWatch idle(200ms, "", 4);  // Gloo, or no board: lines only
  const auto t0 = Clock::now();
  EXPECT_FALSE(idle.expired(t0 + 100ms));
  idle.reported(t0 + 150ms);
  EXPECT_FALSE(idle.expired(t0 + 300ms));
  EXPECT_TRUE(idle.expired(t0 + 400ms));
}

TEST(BenchIdleWatch, AnEmptyBoardIsNoProgress) {
  testing_util::TempDir dir;
  IdleWatch idle(200ms, dir.path() + "/run.progress", 3);  // no rank ever noted
  EXPECT_FALSE(idle.expired(Clock::now() + 100ms));
  EXPECT_TRUE(idle.expired(Clock::now() + 300ms));
}

TEST(BenchIdleWatch, TheBoardIsTheOneTheRanksWrite) {
  workload::Job job;
  job.store_dir = "/r/lab/run/store";
  job.run_id = "bench-1";
  // workload/rank_main.cc: store.dir() + "/" + key_prefix + "progress", key_prefix run_id + "."
  EXPECT_EQ(launch::progress_board_path(job), "/r/lab/run/store/bench-1.progress");
}

}  // namespace
}  // namespace tb
