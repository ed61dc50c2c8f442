// What `exercise check` measures on a live lab, and its verdict.
//
//   bench  the collective of check.toml (op, bytes, iters, warmup) over the ranks, tier and
//          channels of the student's [[workload]] (its tier "frontend" puts every pair on two
//          servers on the VPC); busbw (nccl-tests' arithmetic) against min_busbw_fraction x the
//          lowest emulated rate of the ranks' links of the target tier
//   run    `run` (experiment/experiment.h) of the student's scenario with check.toml's [[fault]]
//          timeline and its targets as [expect]: the stall, detection and outage it measured;
//          or, naming a checkpoint workload (its bytes, every, from and to as the exercise's
//          scenario has them, else exit 2), the gold probe's p99 and the replications on time
//   file   the student's measurements file ([[pair]] a, b, tier, rate, delay) against the lab's
//          own figures: the tier plan::reach gives the pair, the lowest emulated rate and the sum
//          of emulated one-way delays of the links that tier crosses; within tolerance
// The host-bound guard (not for file checks, which measure nothing) (verify/host.h: CPU busy share,
// delay stages' lateness; for a bench also the promptness watch's stalls) is sampled over the
// measurement; a bench's miss is read again as verify reads a class (bench_again). A missed target
// on a host-bound measurement is not judged (exit 2: measure again on a quieter host) unless the
// lab itself explains the miss: a bench whose pairs cross a tier slower than the target, or a run
// whose probes lost packets for longer than the limit or than TCP's minimum retransmission timeout
// (200 ms; the network was down, not slow), or in which nothing reacted to a fault, or whose gold
// probe shared the checkpoint's queue (no QoS classes, or the checkpoint marked gold), or a late
// replication whose bytes need longer at the WAN's emulated rate than the cadence allows. Not
// thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "exercise/spec.h"
#include "scenario/model.h"
#include "verify/host.h"

namespace tb::exercise {

struct CheckTools {
  std::string tb_rank, tb_probe;
};

// One measured value against its target.
struct CheckValue {
  std::string name;  // "busbw", "max_stall_ms"
  std::optional<double> measured;
  double target = 0;     // the bound
  bool at_least = true;  // measured >= target passes (else <=)
  double within = 0;     // > 0: |measured - target| <= within passes (a file check)
  std::string unit;      // "Mbit/s", "ms"
  bool ok = false;
  std::string how;  // what the target is and how the value was measured
};

enum class Verdict { kPass, kFail, kNotJudged };

struct CheckReport {
  std::string exercise, title, lab, scenario_copy;
  std::vector<CheckValue> values;
  Verdict verdict = Verdict::kFail;
  std::string diagnosis;  // what is wrong, in measured terms (FAIL), or why not judged
  verify::HostLoad host;
  std::string results_dir;
  std::string method;             // one line: what ran, on which backend
  std::optional<Hint> next_hint;  // the next one not shown yet (FAIL)
  int next_hint_number = 0;
  int exit_code() const {
    return verdict == Verdict::kPass   ? kExitOk
           : verdict == Verdict::kFail ? kExitFailed
                                       : kExitBadInput;
  }
};

// Whether a bench check measures again after its `reading`-th reading (1-based; pure): a miss
// nothing in the lab explains (`unexplained`: not the tier crossed, not the hash) is read again
// once whatever the host showed, and again while the host was bound in the newest, up to
// verify::kMaxReadings in all; the newest is judged.
bool bench_again(int reading, Verdict v, bool unexplained, bool host_bound);

// A run check's scenario: the student's copy (which may hold no [[fault]] and no [expect]: both
// are the checker's, exit 2) with check.toml's faults (line numbers as in check.toml; a ToR
// renamed for a dual-ToR region) and its targets as [expect]. Pure.
Result<scenario::Scenario> run_scenario_of(const Exercise& ex, const std::string& copy_text,
                                           const std::string& copy_path);

// The measurement on `lab` with the student's scenario at `scenario_copy`.
Result<CheckReport> measure(const Exercise& ex, const std::string& lab,
                            const std::string& scenario_copy, const CheckTools& tools);

}  // namespace tb::exercise
