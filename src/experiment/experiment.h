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
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "congestion/counters.h"
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
  // A lab over several hosts (experiment/across_hosts.h): the coordinator's TCP port.
  int rendezvous_port = 29411;
};

struct Verdict {
  std::string name;  // "max_stall_ms"
  double limit = 0;
  std::optional<double> measured;
  bool ok = true;
  std::string text;  // "max_stall_ms = 500: measured 120.3 (fault 1 flap ...)"
};

// run's gold probe: whenever the scenario has a checkpoint workload (or [expect]
// max_gold_p99_ms), a request/response probe in the gold class (tb-probe rtt against tb-probe
// serve, both marking the first DSCP of [qos] gold, EF 46 by default) from the last server of the
// first checkpoint workload's `from` region to the first server of its `to` region, one every
// kGoldIntervalUs for the whole run: what latency-sensitive traffic on the checkpoint's WAN saw.
inline constexpr int kGoldIntervalUs = 20'000;
inline constexpr uint16_t kGoldPort =
    7300;  // run's fault probes use 7100 + i, checkpoints 7200 + i

struct GoldProbe {
  std::string checkpoint;      // the checkpoint workload whose WAN it crosses
  std::string src, dst, addr;  // server nodes; dst's frontend address
  std::string wan;             // the primary WAN link between the regions ("" = none)
  int dscp = 0, interval_us = kGoldIntervalUs;
  bool measured = false;  // its client printed a result
  int sent = 0, received = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;  // of the answered probes
  // The p99 with lost probes counted as slower than any answered one (what [expect]
  // max_gold_p99_ms judges); nullopt when it is a lost probe (more than 1% lost) or none was sent.
  std::optional<double> p99_with_lost_ms;
  std::string text() const;  // one line: the figures and how they were measured
};

// The q-quantile (linear interpolation between closest ranks, as probe::percentile) of
// `samples` together with `lost` values slower than any of them; nullopt when it falls on (or
// interpolates towards) a lost one, or there is nothing. Pure.
std::optional<double> percentile_with_lost(std::vector<double> samples, int lost, double q);

struct RunResult {
  std::string results_dir;
  metrics::RecoveryReport recovery;
  std::vector<Verdict> verdicts;
  std::vector<std::string> errors;    // a rank, a probe or a fault step that failed
  std::vector<std::string> warnings;  // what the run could not do as asked (a checkpoint late)
  std::optional<GoldProbe> gold;      // when the scenario has a checkpoint workload
  nlohmann::json summary;
  // The congestion agent's counters over the timeline (congestion/counters.h delta, this host's
  // agent) and the pause episodes of that window copied into the results (congestion.jsonl).
  congestion::Counters congestion;
  size_t congestion_episodes = 0;
  // A lab over several hosts: the hosts and their ranks ("a (2), b (2)"); on a joining host, the
  // coordinator that holds the results (results_dir is there) — `summary` and `verdicts` are
  // empty here and the coordinator's verdict is `errors` empty or not.
  std::string hosts, gathered_on;
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

// [expect] max_gold_p99_ms against the gold probe (its p99 with lost probes counted as slower
// than any answered); a missing probe result fails it; none when the key is absent.
std::optional<Verdict> gold_verdict(const scenario::Expect& e, const std::optional<GoldProbe>& g);

}  // namespace tb::experiment
