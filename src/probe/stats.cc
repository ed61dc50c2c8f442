#include "probe/stats.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace tb::probe {

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

Summary summarize(std::vector<double> v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  std::ranges::sort(v);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  double sq = 0;
  for (double x : v) sq += (x - s.mean) * (x - s.mean);
  s.stdev = v.size() > 1 ? std::sqrt(sq / static_cast<double>(v.size() - 1)) : 0;
  s.min = v.front();
  s.max = v.back();
  s.p25 = percentile(v, 0.25);
  s.p50 = percentile(v, 0.5);
  s.p75 = percentile(v, 0.75);
  s.p99 = percentile(v, 0.99);
  return s;
}

nlohmann::json to_json(const Summary& s) {
  return {{"n", s.n},     {"mean", s.mean}, {"stdev", s.stdev}, {"min", s.min}, {"max", s.max},
          {"p25", s.p25}, {"p50", s.p50},   {"p75", s.p75},     {"p99", s.p99}};
}

Summary summary_from_json(const nlohmann::json& j) {
  Summary s;
  s.n = j.value("n", size_t{0});
  s.mean = j.value("mean", 0.0);
  s.stdev = j.value("stdev", 0.0);
  s.min = j.value("min", 0.0);
  s.max = j.value("max", 0.0);
  s.p25 = j.value("p25", 0.0);
  s.p50 = j.value("p50", 0.0);
  s.p75 = j.value("p75", 0.0);
  s.p99 = j.value("p99", 0.0);
  return s;
}

}  // namespace tb::probe
