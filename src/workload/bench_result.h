// A bench run's results across ranks: one row per size with the figures nccl-tests reports
// (time, algbw, busbw, #wrong, out of place and in place) and per-iteration timestamps, and the run
// around them (ranks, transport, errors). Time per size is the mean over ranks of each rank's
// elapsed / iters (nccl-tests' default -a 1); #wrong is summed over ranks. The orchestrator builds
// it (launch/bench_run.h); report/bench.h shows it. Plain values and pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "workload/bench.h"

namespace tb::workload {

// One placement's figures (nccl-tests' four columns, and what they come from).
struct BenchTiming {
  double time_us = 0, algbw_gbps = 0, busbw_gbps = 0;
  uint64_t wrong = 0;
  std::vector<double> rank_time_us;
  std::vector<std::pair<int64_t, int64_t>> iter_ns;  // per iteration: first start, last end
};

struct BenchRow {
  uint64_t bytes = 0, count = 0;
  double time_us = 0, algbw_gbps = 0, busbw_gbps = 0;  // out of place
  uint64_t wrong = 0;
  std::vector<double> rank_time_us;
  std::vector<std::pair<int64_t, int64_t>> iter_ns;  // per iteration: first start, last end
  std::optional<BenchTiming> in_place;               // when the ranks measured it
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
  // GPUs of one server: "net" (the emulated NVLink link) or "shm" (shared memory, bypassing it).
  std::string intra_server = "net";
  int qps = 0, ib_timeout = 0, ib_retry_cnt = 0;
  int rdma_pairs = 0, rail_pairs = 0;
  std::vector<std::string> rdma_devices;  // by rank
  std::vector<std::string> rdma_fallback;
  // Receiver-not-ready NAKs the ranks' RDMA devices sent from every rank's ready line to the
  // end (rxe hw_counters send_rnr_err, summed over the distinct devices): 0 in normal operation
  // (credit flow control, collective/rdma/stream.h). Unset when not read (tcp, or no counters).
  std::optional<uint64_t> rnr_naks;
  std::string lab_rdma, lab_rdma_why;
  std::vector<std::string> nodes;
  // A lab over several hosts: the hosts the ranks ran on, "node1 (10), node2 (10)" ("" : one).
  std::string hosts;
  BenchSpec spec;
  std::vector<BenchRow> rows;
  std::vector<std::string> errors;  // "rank 3 (dc/s1/g1): exit 1: <its error>"
  bool complete = false;            // every size finished on every rank
  uint64_t wrong() const;           // over both placements
  double avg_busbw() const;         // over every row and placement measured (nccl-tests' footer)
  bool ok() const { return complete && errors.empty() && wrong() == 0; }
};

}  // namespace tb::workload
