// `testbedctl run`: a scenario end to end on a live lab. Its collective workload runs steadily
// (one tb-rank per GPU, iterations back to back), its checkpoint workloads replicate across the
// WAN beside it (checkpoint_workload.h), continuous UDP probes cross every path a
// fault affects, route monitors watch the routers and the faulted nodes, and the scenario's
// [[fault]] timeline fires; then everything stops, and the results directory
// (<results root>/<lab>/run-<time>-<pid>/) gets events.jsonl (faults, link and route changes,
// probe outages and every workload iteration on CLOCK_MONOTONIC), summary.json (the recovery
// breakdown per fault, the workload's figures, the [expect] verdicts) and the logs.
// Not thread-safe (one run per process).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/units.h"
#include "lab/state.h"
#include "metrics/recovery.h"
#include "scenario/model.h"
#include "workload/transport.h"

namespace tb::experiment {

// Where a run is, for a progress line (cli/cmd_run.cc reads it from another thread): the
// timeline's start and length once known, its end once reached (CLOCK_MONOTONIC ns; 0 = not
// yet).
struct RunClock {
  std::atomic<int64_t> t0_ns{0}, length_ns{0}, end_ns{0};
};

struct RunOptions {
  std::string workload;           // a [[workload]] name; "" = the first collective one; "none"
  uint64_t size_bytes = 1 << 20;  // the steady workload's message size
  int timeout_ms = 30000;         // the ranks' idle timeout
  int settle_ms = 3000;  // after the last fault step, before stopping (no faults: the run's length)
  int probe_interval_us = 5000;
  bool resilient = false;  // restart the rank group after a failure (also [[workload]] resilient)
  // The workload's transport: tcp, or rdma (rail pairs over RDMA verbs on the lab's rxe
  // devices, collective/rdma/rdma.h) with its tunables. Its channels are the [[workload]]'s.
  workload::TransportOptions transport;
  std::string tb_rank, tb_probe;  // executables
  RunClock* clock = nullptr;      // filled as the run goes, when given
};

struct Verdict {
  std::string name;  // "max_stall_ms"
  double limit = 0;
  std::optional<double> measured;
  bool ok = true;
  std::string text;  // "max_stall_ms = 500: measured 120.3 (fault 1 flap ...)"
};

struct RunResult {
  std::string results_dir;
  metrics::RecoveryReport recovery;
  std::vector<Verdict> verdicts;
  std::vector<std::string> errors;    // a rank, a probe or a fault step that failed
  std::vector<std::string> warnings;  // what the run could not do as asked (a checkpoint late)
  nlohmann::json summary;
  bool ok() const;
};

// --settle's range, seconds.
inline constexpr RealRange kSettleSeconds{0.1, 86400};

// The options alone, before any scenario or lab is read: --size at least 4 bytes, the
// timeout's, --settle's and the transport's ranges (exit-2 errors naming the flag).
Status check_options(const RunOptions& o);

// Checks the options (check_options), the scenario's faults and workload against the lab
// (exit-2 errors) without starting anything.
Status check_run(const scenario::Scenario& s, const lab::LabState& st, const RunOptions& o);

// The run, step by step (experiment/scenario_run.h): check_run; the results directory, the
// faults resolved and scheduled; route monitors, the workload (until it iterates) and probes
// started; the timeline fired; everything stopped and collected into events.jsonl; the
// recovery analysed and [expect] checked into summary.json. `progress` gets a line for the
// workload, one for the timeline and one per step.
Result<RunResult> run_scenario(const scenario::Scenario& s, lab::LabState& st, const RunOptions& o,
                               const std::atomic<bool>& stop,
                               const std::function<void(const std::string&)>& progress);

// [expect] against a recovery report and the workload's throughput fraction.
std::vector<Verdict> check_expectations(const scenario::Expect& e, const metrics::RecoveryReport& r,
                                        std::optional<double> busbw_fraction);

// [expect] checkpoint_on_time: one verdict over every checkpoint workload's replications
// (`late` of `total` finished after the next was due); none when the key is absent.
std::optional<Verdict> checkpoint_verdict(const scenario::Expect& e, int late, int total,
                                          const std::string& what);

}  // namespace tb::experiment
