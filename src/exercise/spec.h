// Classroom exercises as data: a directory exercises/<NN-slug>/ holding
//   scenario.toml  the lab's starting state (a scenario file; docs/scenario.md)
//   task.md        the task sheet: a "# " title, the story, the goal, what to look at, then
//                  hints as "## Hint 1", "## Hint 2", ... sections revealed one at a time
//   check.toml     what `exercise check` measures and the target it must meet
// and this file's loader: every problem in check.toml is an exit-2 error "FILE:LINE:COL:
// FIELD: PROBLEM; VALID" (the scenario loader's form), all of them, in file order.
//
// check.toml:
//   [check]
//   measure = "bench" | "run" | "file"
//   workload = "job"        (bench, run) the student's scenario's [[workload]] whose ranks,
//                           tier and channels the measurement uses (so editing it is the fix)
//   bench:  op = "allreduce", bytes = "4M", iters = 4, warmup = 1, ports = "route" | "spread"
//           (bench --ports: "spread" binds channel c to NIC port c mod ports, as NCCL does),
//           rounds = 3 (odd, 1-9: the bench again, new connections each time, until a verdict
//           has a majority; for targets a hash's draw decides: check.cc)
//   run:    size = "1M" (the steady workload's message size), settle = "3s" (run --settle: how
//           long the run goes on after its last fault step; without faults, its length);
//           workload may name a checkpoint workload: then the run drives no steady workload
//   [target]
//   bench:  min_busbw_fraction = 0.9, of = "rail"   busbw >= fraction x the lowest emulated
//                                                   rate of the ranks' links of that tier;
//                                                   "nic": of a GPU's rail ports together
//                                                   (the lowest such sum over the ranks);
//           max_ecmp_share = 0.5                    every ToR's busiest uplink carries at most
//                                                   this share of its bytes up (0 < x <= 1)
//           max_control_p99_ms = 40                 while the bench runs, UDP probes from each
//                                                   of the job's servers to its region's transit
//                                                   router over the VPC: their p99 (lost ones
//                                                   counted) at most this; with it,
//                                                   min_busbw_fraction may be left out
//   run:    max_stall_ms, max_detection_ms, max_recovery_ms (these need a [[fault]] timeline),
//           max_gold_p99_ms, checkpoint_on_time = true (any of them; run's [expect] keys)
//   file:   file = "measurements.toml", pairs = [["dc/s0/g0", "dc/s0/g1"], ...]; [target]
//           tolerance = 0.15 (and delay_slack_us = 100): the student's [[pair]] a, b, tier,
//           rate, delay against the lab's own figures (exercise/check.h)
//   [[fault]]  (run only; required by the stall, detection and recovery targets) the timeline,
//              in scenario syntax; a fault naming "<region>/tor<j>"
//              hits tor<j>a when the student made the region dual-ToR.
// Pure (reads files); thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace tb::exercise {

enum class Measure { kBench, kRun, kFile };

struct CheckSpec {
  Measure measure = Measure::kBench;
  std::string workload;  // the student's [[workload]] the measurement follows
  // bench
  std::string op = "allreduce";
  uint64_t bytes = 4ull << 20;
  int iters = 4, warmup = 1;
  int rounds = 1;  // bench: odd; the verdict of the majority of rounds (check.cc)
  std::optional<double> min_busbw_fraction;
  // bench: every ToR that sent at least 1 MiB over its uplinks, its busiest uplink's share of
  // those bytes at most this (interface counters over the bench; experiment::ecmp_groups)
  std::optional<double> max_ecmp_share;
  // bench: the control probe's p99 (ms) over the VPC while the bench runs (check.cc)
  std::optional<double> max_control_p99_ms;
  std::string of_tier = "rail";  // "rail" (scale-out) | "frontend" | "nic" (all rail ports)
  bool spread_ports = false;     // ports = "spread": channels bound to NIC ports in turn
  // run
  uint64_t size = 1 << 20;
  int settle_ms = 3000;  // run --settle
  std::optional<double> max_stall_ms, max_detection_ms, max_recovery_ms, max_gold_p99_ms;
  std::optional<bool> checkpoint_on_time;
  std::string faults_text;  // the [[fault]] tables, verbatim, in scenario syntax
  // file: the student's measurements file (copied from the exercise directory at start) and
  // the pairs it must give, each with its tier, rate and one-way delay
  std::string file;
  std::vector<std::pair<std::string, std::string>> pairs;
  double tolerance = 0.15;      // relative, for rate and delay
  double delay_slack_us = 100;  // absolute, for delay (a probe's own cost)
};

struct Hint {
  std::string title;  // "Hint 1"
  std::string text;
};

struct Exercise {
  int number = 0;     // from the directory's "NN-"
  std::string id;     // "02-wrong-nic"
  std::string dir;    // absolute
  std::string title;  // task.md's "# " line
  std::string sheet;  // task.md up to the first hint
  std::vector<Hint> hints;
  CheckSpec check;
  std::string scenario_path() const { return dir + "/scenario.toml"; }
  std::string task_path() const { return dir + "/task.md"; }
};

// The exercises' root: $TESTBEDCTL_EXERCISES, else the source tree's exercises/ (compiled in).
std::string exercises_root();

// Every exercise directory under `root` ("NN-slug"), by number; a directory that fails to load
// is an error naming it (exit 2).
// The whole file at `path`; an error says "PATH: cannot read WHAT".
Result<std::string> read_text(const std::string& path, const std::string& what);

Result<std::vector<Exercise>> list_exercises(const std::string& root);
// "2", "02" or "02-wrong-nic" -> that exercise; unknown: exit 2 naming the valid ones.
Result<Exercise> find_exercise(const std::string& root, const std::string& which);
// One directory: task.md and check.toml read and checked (scenario.toml must exist; it is
// loaded by `start`).
Result<Exercise> load_exercise(const std::string& dir);

// The parsers, from text (`name` is the file in messages; for tests).
Result<CheckSpec> parse_check(const std::string& text, const std::string& name);
// title, sheet and hints of a task sheet; no "# " title is an error at line 1.
Status parse_task(const std::string& text, const std::string& name, Exercise& ex);

}  // namespace tb::exercise
