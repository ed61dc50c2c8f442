#include "workload/bench_result.h"

#include <algorithm>
#include <cstdint>

#include "metrics/busbw.h"

namespace tb::workload {

BenchRow combine_rows(collective::Coll coll, int n, const std::vector<RankRow>& per_rank) {
  BenchRow row;
  if (per_rank.empty()) return row;
  row.bytes = per_rank.front().bytes;
  row.count = per_rank.front().count;
  double sum = 0;
  for (const auto& r : per_rank) {
    sum += r.time_us;
    row.wrong += r.wrong;
    row.rank_time_us.push_back(r.time_us);
  }
  row.time_us = sum / static_cast<double>(per_rank.size());
  const auto bw = metrics::bandwidth(coll, row.bytes, row.time_us, n);
  row.algbw_gbps = bw.algbw_gbps;
  row.busbw_gbps = bw.busbw_gbps;
  const size_t iters = per_rank.front().iter_ns.size();
  for (size_t i = 0; i < iters; ++i) {
    int64_t s = INT64_MAX, e = 0;
    for (const auto& r : per_rank) {
      if (i >= r.iter_ns.size()) continue;
      s = std::min(s, r.iter_ns[i].first);
      e = std::max(e, r.iter_ns[i].second);
    }
    row.iter_ns.emplace_back(s, e);
  }
  return row;
}

uint64_t BenchResult::wrong() const {
  uint64_t w = 0;
  for (const auto& r : rows) w += r.wrong;
  return w;
}

double BenchResult::avg_busbw() const {
  if (rows.empty()) return 0;
  double s = 0;
  for (const auto& r : rows) s += r.busbw_gbps;
  return s / static_cast<double>(rows.size());
}

}  // namespace tb::workload
