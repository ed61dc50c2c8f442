// The steps of one `run` (experiment.h run_scenario), as a class holding what each step leaves
// for the next: prepare (results directory, faults resolved and scheduled, paths to probe),
// start the route monitors, the workload (and the checkpoint workloads beside it) and the probes
// (and the gold probe across the first checkpoint workload's WAN, experiment.h GoldProbe),
// fire the timeline, collect (everything stopped, events.jsonl written) and summarise (recovery,
// [expect], summary.json). Call the steps in that order, once each. Destroying it part-way stops
// what was started (probes, then the workload, then the monitors). One thread; not thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiment/checkpoint_workload.h"
#include "experiment/command_workload.h"
#include "experiment/experiment.h"
#include "experiment/monitors.h"
#include "experiment/probes.h"
#include "experiment/steady.h"
#include "fault/fault.h"
#include "metrics/recovery.h"

namespace tb::experiment {

// The [[workload]] a run drives (kind collective or command): o.workload's, else the first;
// none for "none".
const scenario::Workload* pick_workload(const scenario::Scenario& s, const RunOptions& o);

// A command [[workload]]'s job on `st` (launch/command.h prepare_command: ranks, tier, the
// program looked up): exit-2 errors naming the workload. Fills `o` from the workload.
Result<launch::CommandJob> command_job(const scenario::Workload& w, const lab::LabState& st,
                                       launch::CommandOptions* o);

class ScenarioRun {
 public:
  ScenarioRun(const scenario::Scenario& s, lab::LabState& st, const RunOptions& o,
              const std::atomic<bool>& stop, std::function<void(const std::string&)> progress)
      : s_(s), st_(st), o_(o), stop_(stop), progress_(std::move(progress)) {}

  Status prepare();
  Status start_monitors();
  Status start_workload();  // and waits (bounded) for its first iterations
  Status start_probes();
  void fire_timeline();
  void collect();
  RunResult summarise();

 private:
  Status start_command(const scenario::Workload& w);
  Status start_checkpoints();
  void collect_lab_events();
  void collect_route_changes(
      const std::vector<std::pair<std::string, netlink::RouteChange>>& changes);
  void collect_outages(const std::vector<std::vector<metrics::Interval>>& outages);
  void collect_iterations();

  const scenario::Scenario& s_;
  lab::LabState& st_;
  const RunOptions& o_;
  const std::atomic<bool>& stop_;
  const std::function<void(const std::string&)> progress_;

  // prepare
  std::string id_;
  RunResult res_;
  std::vector<fault::Resolved> faults_;
  std::vector<fault::Step> steps_;
  int64_t length_ns_ = 0;  // the last step and the settle time after it
  std::vector<ProbePair> pairs_;
  std::vector<ProbePair> gold_pair_;  // none or one: the gold probe
  std::optional<GoldProbe> gold_;
  // start_*; declared in start order, so destroyed in reverse
  RouteMonitors monitors_;
  std::optional<SteadyWorkload> workload_;
  std::optional<CommandWorkload> command_;        // kind = "command" instead
  std::string transport_ = "none (no workload)";  // how the workload moves bytes, for reports
  std::vector<std::unique_ptr<CheckpointWorkload>> checkpoints_;  // beside it
  ProbeSet probes_;
  ProbeSet gold_probe_;
  // fire_timeline
  int64_t t0_ = 0, t_end_ = 0;
  Status timeline_;
  // collect
  std::vector<nlohmann::json> events_;  // the run's events.jsonl
  metrics::RecoveryInput in_;
  uint64_t wrong_ = 0;  // wrong elements in the workload's checks
};

}  // namespace tb::experiment
