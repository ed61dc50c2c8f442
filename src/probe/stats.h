// Summary statistics of a sample (RTTs in microseconds, for tb-probe and verify): count, mean,
// sample standard deviation (n-1), min, max and percentiles (linear interpolation between
// closest ranks, numpy's default). Pure; thread-safe.
#pragma once

#include <cstddef>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tb::probe {

struct Summary {
  size_t n = 0;
  double mean = 0, stdev = 0, min = 0, max = 0, p25 = 0, p50 = 0, p75 = 0, p99 = 0;
  friend bool operator==(const Summary&, const Summary&) = default;
};

// All zero for an empty sample; stdev 0 for a single value.
Summary summarize(std::vector<double> samples);
// q in [0, 1] over sorted values.
double percentile(const std::vector<double>& sorted, double q);

nlohmann::json to_json(const Summary& s);
Summary summary_from_json(const nlohmann::json& j);

}  // namespace tb::probe
