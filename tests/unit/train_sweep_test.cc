// testbedctl train's arithmetic and output without a lab: a row from the ranks' step lines
// (the slowest rank per step, medians), efficiency against the sweep's smallest count, the
// guard's flag in the table and the JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "experiment/train_sweep.h"
#include "report/train.h"

namespace tb {
namespace {

workload::StepRow step(int64_t start, int64_t ms, int64_t compute_ms, uint64_t rail_bytes) {
  workload::StepRow r;
  r.start_ns = start;
  r.end_ns = start + ms * 1'000'000;
  r.compute_ns = compute_ms * 1'000'000;
  r.dp_wait_ns = (ms - compute_ms) * 1'000'000;
  r.bytes["rail"] = rail_bytes;
  return r;
}

TEST(TrainSweep, RowIsTheMedianOfTheSlowestRankPerStep) {
  // Rank 1 is the slower one in steps 0 and 2, rank 0 in step 1; the third step is an outlier.
  std::vector<std::vector<workload::StepRow>> by_rank = {
      {step(0, 10, 8, 100), step(0, 14, 8, 100), step(0, 9, 8, 100)},
      {step(0, 12, 8, 300), step(0, 11, 8, 300), step(0, 40, 8, 300)}};
  by_rank[1][2].wrong = 2;
  const auto row = experiment::summarise_steps(by_rank);
  EXPECT_EQ(row.steps, 3);
  EXPECT_DOUBLE_EQ(row.step_ms, 14);  // median of 12, 14, 40
  EXPECT_DOUBLE_EQ(row.compute_ms, 8);
  EXPECT_DOUBLE_EQ(row.exposed_ms, 6);
  EXPECT_EQ(row.bytes.at("rail"), 400u);  // one step, both ranks
  EXPECT_EQ(row.wrong, 2u);
  // A rank that reported fewer steps bounds the count.
  by_rank[0].pop_back();
  EXPECT_EQ(experiment::summarise_steps(by_rank).steps, 2);
}

experiment::TrainRow row_at(int servers, double samples_per_s) {
  experiment::TrainRow r;
  r.servers = servers;
  r.steps = 3;
  r.samples_per_s = samples_per_s;
  return r;
}

TEST(TrainSweep, EfficiencyAgainstTheSmallestCountThatRan) {
  experiment::TrainResult res;
  res.rows = {row_at(1, 100), row_at(2, 180), row_at(4, 300)};
  experiment::fill_efficiency(res);
  EXPECT_EQ(res.base_servers, 1);
  EXPECT_DOUBLE_EQ(res.rows[0].efficiency, 1.0);
  EXPECT_DOUBLE_EQ(res.rows[1].efficiency, 0.9);
  EXPECT_DOUBLE_EQ(res.rows[2].efficiency, 0.75);
  // The 1-server row failed: 2 servers is the base, and the failed row has no efficiency.
  res.rows[0].errors.push_back("rank 0: exit 1");
  experiment::fill_efficiency(res);
  EXPECT_EQ(res.base_servers, 2);
  EXPECT_DOUBLE_EQ(res.rows[0].efficiency, 0);
  EXPECT_DOUBLE_EQ(res.rows[2].efficiency, 300.0 * 2 / (4 * 180));
  EXPECT_FALSE(res.ok());
}

TEST(TrainSweep, HostBoundRowsAreFlaggedWithTheirEvidence) {
  experiment::TrainResult res;
  res.lab = "tr1";
  res.rows = {row_at(1, 100), row_at(2, 150)};
  res.rows[1].host.cpu_busy = 0.97;
  res.rows[1].host.host_bound = true;
  experiment::fill_efficiency(res);
  EXPECT_NE(report::train_row(res.rows[1], 1).find("HOST-BOUND"), std::string::npos);
  EXPECT_EQ(report::train_row(res.rows[0], 1).find("HOST-BOUND"), std::string::npos);
  const auto footer = report::train_footer(res);
  EXPECT_NE(footer.find("2 server(s): HOST-BOUND, not the network's figure"), std::string::npos)
      << footer;
  EXPECT_NE(footer.find("97"), std::string::npos) << footer;
  const auto j = report::train_json(res);
  EXPECT_EQ(j["rows"][1]["host_bound"], true);
  EXPECT_EQ(j["rows"][0]["host_bound"], false);
  EXPECT_DOUBLE_EQ(j["rows"][1]["efficiency"].get<double>(), 0.75);
  // Side by side: a host-bound figure says so.
  const auto cmp = report::train_compare({res, res});
  EXPECT_NE(cmp.find("(host)"), std::string::npos) << cmp;
}

}  // namespace
}  // namespace tb
