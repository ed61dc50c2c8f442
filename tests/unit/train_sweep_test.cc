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

// ECMP groups: a ToR's uplinks (aggregation links with the ToR at a) with the bytes it sent up
// each, shares of the group, links carrying >= 5%; other tiers and single uplinks are no group.
TEST(TrainSweep, EcmpGroupsAreEachTorsUplinksWithTheirShares) {
  auto agg = [](const std::string& a, const std::string& b, uint64_t ab, uint64_t ba) {
    return experiment::LinkBytes{a, b, "aggregation", 100e6, ab, ba};
  };
  const std::vector<experiment::LinkBytes> links = {
      agg("dc/tor0:sp0", "dc/spine0:t0", 100'000, 5'000'000),  // tor0 sends ACKs only
      agg("dc/tor1:sp0", "dc/spine0:t1", 6'000'000, 10'000),
      agg("dc/tor0:sp1", "dc/spine1:t0", 300'000, 1'000'000),
      agg("dc/tor1:sp1", "dc/spine1:t1", 0, 0),  // idle: the flows hashed elsewhere
      agg("dc/tor1:sp2", "dc/spine2:t1", 4'000'000, 20'000),
      agg("dc/tor1:sp3", "dc/spine3:t1", 100'000, 0),  // ACK-sized
      {"dc/s0/g0:raila", "dc/tor0:s0g0", "scale-out", 400e6, 9999, 9999},
      agg("hz/tor0:sp0", "hz/spine0:t0", 7, 7)};  // one uplink: nothing to hash over
  const auto g = experiment::ecmp_groups(links);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].node, "dc/tor0");
  EXPECT_EQ(g[0].links, (std::vector<std::string>{"dc/tor0:sp0", "dc/tor0:sp1"}));
  EXPECT_EQ(g[0].total, 400'000u);
  EXPECT_EQ(g[0].carrying, 2);
  EXPECT_DOUBLE_EQ(g[0].max_share, 0.75);
  EXPECT_EQ(g[1].node, "dc/tor1");
  EXPECT_EQ(g[1].bytes, (std::vector<uint64_t>{6'000'000, 0, 4'000'000, 100'000}));
  EXPECT_EQ(g[1].total, 10'100'000u);
  EXPECT_EQ(g[1].carrying, 2);  // 100 kB of 10.1 MB is under 5%
  EXPECT_DOUBLE_EQ(g[1].max_share, 6.0 / 10.1);
  EXPECT_TRUE(experiment::ecmp_groups({}).empty());

  experiment::TrainResult res;
  res.rows = {row_at(4, 100)};
  res.rows[0].links = links;
  res.rows[0].ecmp = g;
  const auto footer = report::train_footer(res);
  EXPECT_NE(footer.find("4 server(s): ECMP dc/tor1 -> spines, 10.1 MB: sp0 59%, sp1 0%, sp2 40%, "
                        "sp3 1% (2 of 4 links carrying >= 5%, busiest 2.38x an even share)"),
            std::string::npos)
      << footer;
  // tor0 sent 0.4 MB up (ACKs): in the JSON, not printed.
  EXPECT_EQ(footer.find("ECMP dc/tor0"), std::string::npos) << footer;
  const auto j = report::train_json(res);
  ASSERT_EQ(j["rows"][0]["ecmp"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["ecmp"][1]["links"][1]["bytes"], 0);
  EXPECT_EQ(j["rows"][0]["ecmp"][1]["carrying"], 2);
  EXPECT_EQ(j["rows"][0]["links"].size(), links.size());
}

}  // namespace
}  // namespace tb
