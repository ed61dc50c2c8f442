// A bench run's results across ranks, and how they are shown: the nccl-tests table (one row
// per size: size, count, type, redop, root, time, algbw, busbw, #wrong; plus busbw in Gbit/s
// to compare with link rates), its footer, and the JSON twin with every row and per-iteration
// timestamps. Time per size is the mean over ranks of each rank's elapsed / iters (nccl-tests'
// default -a 1); #wrong is summed over ranks. Pure formatting; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "workload/bench.h"

namespace tb::workload {

struct BenchRow {
  uint64_t bytes = 0, count = 0;
  double time_us = 0, algbw_gbps = 0, busbw_gbps = 0;
  uint64_t wrong = 0;
  std::vector<double> rank_time_us;
  std::vector<std::pair<int64_t, int64_t>> iter_ns;  // per iteration: first start, last end
};

// Combines one size's rows from every rank (same bytes/count).
BenchRow combine_rows(collective::Coll coll, int n, const std::vector<RankRow>& per_rank);

struct BenchResult {
  std::string lab, run_id, results_dir;
  std::string impl, describe, algo_label, shaping;
  // How the bytes moved: "tcp" or "rdma" (native; Gloo runs its tcp transport), with the RDMA
  // tunables, how many rail pairs went over RDMA, each rank's RDMA devices ("-" = none) and
  // why pairs fell back; and the lab's RDMA status ("rxe" | "none") with its reason.
  std::string transport = "tcp";
  int qps = 0, ib_timeout = 0, ib_retry_cnt = 0;
  int rdma_pairs = 0, rail_pairs = 0;
  std::vector<std::string> rdma_devices;  // by rank
  std::vector<std::string> rdma_fallback;
  std::string lab_rdma, lab_rdma_why;
  std::vector<std::string> nodes;
  BenchSpec spec;
  std::vector<BenchRow> rows;
  std::vector<std::string> errors;  // "rank 3 (dc/s1/g1): exit 1: <its error>"
  bool complete = false;            // every size finished on every rank
  uint64_t wrong() const;
  double avg_busbw() const;
  bool ok() const { return complete && errors.empty() && wrong() == 0; }
};

std::string table_header(const BenchResult& r);
std::string table_row(const BenchResult& r, const BenchRow& row);
std::string table_footer(const BenchResult& r);
nlohmann::json to_json(const BenchResult& r);

// How the numbers were measured, for the header, the footer and the JSON.
std::string measured_note(const BenchResult& r);
// The transport and the lab's RDMA status in one line: "rdma: 4 of 4 rail pairs over RDMA verbs
// (2 QPs/peer, ib_timeout 14, retry 7), the rest TCP; lab rdma: rxe (...)".
std::string transport_note(const BenchResult& r);

}  // namespace tb::workload
