// `testbedctl train`: the training-step workload (workload/training.h) on a live lab, once per
// server count of a sweep, and the scaling efficiency it gives.
//
// For each count N: the GPUs of the first N selected servers (topology order) become one job,
// one tb-rank per GPU in its namespace; each rank appends a line per timed step. A row is the
// median over the timed steps of the slowest rank's step (its step time, compute, time in
// tensor-parallel collectives and pipeline transfers, and waiting for the gradient buckets);
// exposed communication = step time - compute; bytes per tier are every rank's sends in one
// step. samples/s = dp * micro_batches * samples / step time; scaling efficiency = samples/s at
// N ÷ (N × samples/s at the smallest count, when that is 1 server; else at that count scaled
// by N / its N, and the report says so).
//
// The fidelity guard: the host's CPU busy share and the delay stages' lateness over each row's
// steps, from the moment every rank has joined its groups to the end (verify/host.h, as
// `verify --under-load`), and every link's counters and queues read every 0.5 s over the same
// window (lab/watch.h): a row whose host was this busy, whose stages released packets late, or
// with an unfaulted link delivering less than its emulated rate while bytes waited for it
// (verify::short_links) is flagged host-bound with the evidence instead of being the network's.
// The same counters give each row's bytes per link and the aggregation tier's ECMP shares.
// Not thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "congestion/counters.h"
#include "lab/state.h"
#include "scenario/model.h"
#include "verify/host.h"
#include "workload/job.h"
#include "workload/training.h"

namespace tb::experiment {

struct TrainOptions {
  std::string ranks = "all";
  std::vector<int> servers;  // the sweep; empty = every selected server, once
  // Pairs on different servers talk over the frontend (the VPC: each GPU's NVLink-side address,
  // routed through its server) instead of the rail; pairs inside a server stay on NVLink.
  bool frontend = false;
  workload::TrainingSpec spec;  // compute_ns already scaled
  int64_t compute_real_ns = 0;  // the scenario's figure, for the report
  double compute_scale = 1;     // [scale] compute
  workload::TransportOptions transport;
  int timeout_ms = 30000;
  std::string tb_rank;
};

// One link's traffic over a row's window, from its a end's interface counters (lab/watch.h):
// bytes a -> b (a's tx) and b -> a (a's rx).
struct LinkBytes {
  std::string a, b;  // "node:ifname"
  std::string tier;  // plan::to_string(Tier)
  double emulated_bps = 0;
  uint64_t ab = 0, ba = 0;
};

// A link carries traffic in an ECMP group when it has at least this share of the group's bytes
// (TCP's ACKs for data the other way stay under it).
inline constexpr double kEcmpCarrying = 0.05;

// Parallel links that a multipath route hashes flows over: one node's links to the next tier up
// (a ToR's uplinks to the spines), with the share of the bytes each carried out of that node.
struct EcmpGroup {
  std::string node;                // "dc/tor1"
  std::vector<std::string> links;  // "dc/tor1:sp0", ... in topology order
  std::vector<uint64_t> bytes;     // out of `node` over each link
  uint64_t total = 0;
  double max_share = 0;  // the busiest link's share of `total` (1/n = even, 1 = one link)
  int carrying = 0;      // links with at least kEcmpCarrying of `total`
};

// The aggregation tier's groups (pure): per ToR with two or more uplinks, the bytes it sent over
// each. Groups keep topology order; one whose links carried nothing has total 0.
std::vector<EcmpGroup> ecmp_groups(const std::vector<LinkBytes>& links);

// One server count's result.
struct TrainRow {
  int servers = 0, ranks = 0, tp = 1, pp = 1, dp = 1;
  std::string run_id, results_dir;
  int steps = 0;                       // timed steps every rank reported
  double step_ms = 0, compute_ms = 0;  // medians (slowest rank per step)
  double exposed_ms = 0, tp_ms = 0, pp_ms = 0, dp_wait_ms = 0;
  std::map<std::string, uint64_t> bytes;  // one step, all ranks, by tier
  double samples_per_s = 0;
  double efficiency = 0;  // 0 until the sweep's base row is known
  uint64_t wrong = 0;
  verify::HostLoad host;  // the guard's evidence
  // Every link's bytes over the guard's window (empty when the lab's links could not be read:
  // link_error says why), and the aggregation tier's ECMP groups from them.
  std::vector<LinkBytes> links;
  std::vector<EcmpGroup> ecmp;
  std::string link_error;
  // The congestion agent's counters over the same window (congestion/counters.h delta: its
  // stats file read when the window opened and at the end); kNoAgent without one.
  congestion::Counters congestion;
  std::vector<std::string> errors;
  bool ok() const { return errors.empty() && wrong == 0 && steps > 0; }
};

struct TrainResult {
  std::string label;  // the curve's name in reports: "lab" or "lab/workload"
  std::string lab, scenario, shaping, transport;
  std::string tier = "rail";  // between servers: "rail" or "frontend"
  workload::TrainingSpec spec;
  int64_t compute_real_ns = 0;
  double compute_scale = 1, bandwidth_scale = 0;
  int base_servers = 0;  // the row efficiency is relative to
  std::vector<TrainRow> rows;
  std::vector<std::string> errors;
  bool ok() const;
};

// The options against the lab: ranks, each sweep count at most the selected servers, tp inside
// a server, the ranks dividing into tp × pp, the spec's ranges -> exit 2 errors naming the flag.
Status check_train(const lab::LabState& lab, const TrainOptions& o);

// The spec and sweep of a scenario's training workload, compute scaled by [scale] compute.
TrainOptions train_options(const scenario::Scenario& s, const scenario::Workload& w);

// One row from the ranks' step lines (pure): medians of the slowest rank's step, the bytes of
// one step summed over ranks, wrong values, errors.
TrainRow summarise_steps(const std::vector<std::vector<workload::StepRow>>& by_rank);

// Fills each row's efficiency against the sweep's smallest count (pure).
void fill_efficiency(TrainResult& r);

// run's training workload: every selected GPU as one steady job (workload/training_rank.h: steps
// until run's stop file), results in `results_dir`, the transport's kind and the timeout given.
Result<workload::Job> training_run_job(const scenario::Scenario& s, const scenario::Workload& w,
                                       const lab::LabState& st,
                                       const workload::TransportOptions& transport, int timeout_ms,
                                       const std::string& id, const std::string& results_dir);

// Runs the sweep; on_row after each count (with efficiency filled so far). `stop` kills the
// ranks. Rows that failed keep their errors; later counts still run.
Result<TrainResult> run_train(const lab::LabState& lab, const TrainOptions& o,
                              const std::function<void(const TrainResult&)>& on_row,
                              const std::atomic<bool>& stop);

}  // namespace tb::experiment
