// The nccl-tests loop one rank runs: for each size, out of place and then in place
// (nccl-tests' layouts, collective/types.h), each: `check` untimed correctness runs (fresh
// data each), `warmup` untimed calls, a barrier, `iters` calls back to back under one
// monotonic timer with a timestamp per iteration, and `check` correctness runs again, so data
// corrupted while timing shows too. The buffers are allocated once for the largest size and
// each call's buffers sit at an offset shifted between iterations (nccl-tests' startColl), so
// a call that reads a stale pointer or a previous call's data is caught by the checks, which
// run at different offsets before and after the timed loop. Each finished size becomes a Row
// the caller streams out (the orchestrator shows progress from them).
// Not thread-safe: one Impl per rank.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "collective/types.h"
#include "core/error.h"
#include "core/units.h"
#include "workload/impl.h"

namespace tb::workload {

struct BenchSpec {
  collective::Coll coll = collective::Coll::kAllReduce;
  std::optional<collective::Algo> algo;  // none: the implementation's default
  collective::DataType type = collective::DataType::kFloat32;
  collective::RedOp op = collective::RedOp::kSum;
  int root = 0;
  uint64_t min_bytes = 8 * 1024, max_bytes = 64ull << 20;
  double step_factor = 2;
  int iters = 20, warmup = 5, check = 1;
  bool in_place = true;  // also time and check in place (nccl-tests always does)
};

// What the flags may say (nccl-tests' -n, -w, -c, -f; -f must also be > 1 when -b < -e).
inline constexpr IntRange kItersRange{1, 100000};
inline constexpr IntRange kWarmupRange{0, 100000};
inline constexpr IntRange kCheckRange{0, 1000};
inline constexpr RealRange kStepFactorRange{1, 1024};

nlohmann::json to_json(const BenchSpec& s);
Result<BenchSpec> bench_spec_from_json(const nlohmann::json& j);
// Flags a user can get wrong (sizes, factor, counts, prod); the message names the flag.
Status validate(const BenchSpec& s);

struct SizePoint {
  uint64_t bytes;  // the size column
  uint64_t count;  // per-rank count (collective::Call convention)
};
// -b .. -e by -f, through metrics::count_for; duplicates (tiny sizes) dropped.
std::vector<SizePoint> sweep(const BenchSpec& s, int n);

// One size's result on one rank: out of place, and in place (ip_*) when the spec asks.
struct RankRow {
  uint64_t bytes = 0, count = 0;
  double time_us = 0;  // elapsed / iters on this rank
  uint64_t wrong = 0;  // mismatched elements over the check runs, before and after timing
  std::vector<std::pair<int64_t, int64_t>> iter_ns;  // CLOCK_MONOTONIC start, end per iteration
  bool in_place = false;                             // whether the ip_* figures were measured
  double ip_time_us = 0;
  uint64_t ip_wrong = 0;
  std::vector<std::pair<int64_t, int64_t>> ip_iter_ns;
};
nlohmann::json to_json(const RankRow& r);
RankRow rank_row_from_json(const nlohmann::json& j);

// Runs the sweep; `on_row` is called after each size. Stops at the first error.
Status run_bench(Impl& impl, const BenchSpec& spec,
                 const std::function<void(const RankRow&)>& on_row);

// Steady mode, the workload of `run`: one size (spec.max_bytes), `check` correctness runs and
// `warmup` calls, then iterations back to back until the orchestrator writes K into
// `stop_path` (iterations K and later are not started; K is chosen ahead of every rank, so all
// stop at the same one). `on_iter(i, start_ns, end_ns)` after each. Ends with a second set of
// correctness runs, so a fault that corrupted data shows in `*wrong`.
Status run_steady(Impl& impl, const BenchSpec& spec, const std::string& stop_path,
                  int64_t start_iter, const std::function<void(int64_t, int64_t, int64_t)>& on_iter,
                  uint64_t* wrong);

}  // namespace tb::workload
