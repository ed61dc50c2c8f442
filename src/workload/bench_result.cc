#include "workload/bench_result.h"

#include <algorithm>
#include <cstdint>

#include "metrics/busbw.h"

namespace tb::workload {

namespace {

BenchTiming combine(collective::Coll coll, int n, const std::vector<RankRow>& per_rank,
                    bool in_place) {
  BenchTiming t;
  double sum = 0;
  for (const auto& r : per_rank) {
    const double us = in_place ? r.ip_time_us : r.time_us;
    sum += us;
    t.wrong += in_place ? r.ip_wrong : r.wrong;
    t.rank_time_us.push_back(us);
  }
  t.time_us = sum / static_cast<double>(per_rank.size());
  const auto bw = metrics::bandwidth(coll, per_rank.front().bytes, t.time_us, n);
  t.algbw_gbps = bw.algbw_gbps;
  t.busbw_gbps = bw.busbw_gbps;
  const auto& first = in_place ? per_rank.front().ip_iter_ns : per_rank.front().iter_ns;
  for (size_t i = 0; i < first.size(); ++i) {
    int64_t s = INT64_MAX, e = 0;
    for (const auto& r : per_rank) {
      const auto& it = in_place ? r.ip_iter_ns : r.iter_ns;
      if (i >= it.size()) continue;
      s = std::min(s, it[i].first);
      e = std::max(e, it[i].second);
    }
    t.iter_ns.emplace_back(s, e);
  }
  return t;
}

}  // namespace

BenchRow combine_rows(collective::Coll coll, int n, const std::vector<RankRow>& per_rank) {
  BenchRow row;
  if (per_rank.empty()) return row;
  row.bytes = per_rank.front().bytes;
  row.count = per_rank.front().count;
  auto oop = combine(coll, n, per_rank, false);
  row.time_us = oop.time_us;
  row.algbw_gbps = oop.algbw_gbps;
  row.busbw_gbps = oop.busbw_gbps;
  row.wrong = oop.wrong;
  row.rank_time_us = std::move(oop.rank_time_us);
  row.iter_ns = std::move(oop.iter_ns);
  if (std::all_of(per_rank.begin(), per_rank.end(), [](const RankRow& r) { return r.in_place; }))
    row.in_place = combine(coll, n, per_rank, true);
  return row;
}

uint64_t BenchResult::wrong() const {
  uint64_t w = 0;
  for (const auto& r : rows) w += r.wrong + (r.in_place ? r.in_place->wrong : 0);
  return w;
}

double BenchResult::avg_busbw() const {
  double s = 0;
  int k = 0;
  for (const auto& r : rows) {
    s += r.busbw_gbps;
    ++k;
    if (r.in_place) {
      s += r.in_place->busbw_gbps;
      ++k;
    }
  }
  return k == 0 ? 0 : s / k;
}

}  // namespace tb::workload
