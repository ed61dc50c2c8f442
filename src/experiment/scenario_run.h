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
#include <map>
#include <memory>
#include <mutex>
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

// The steady job of collective workload `w`: one rank per selected GPU, o's message size and
// transport, in `results_dir`/workload.
Result<workload::Job> steady_job(const scenario::Workload& w, const lab::LabState& st,
                                 const RunOptions& o, const std::string& id,
                                 const std::string& results_dir);

// This host's part of a run over several hosts (experiment/across_hosts.h).
struct HostPart {
  bool coordinates = false;
  std::vector<char> local;  // per workload rank: on this host
  std::string run_id;       // a joining host: the coordinator's run
};

class ScenarioRun {
 public:
  // `part`: a lab over several hosts (nullptr: one host). Each host fires the faults it holds a
  // part of, starts its own ranks, monitors and probes; the coordinator merges the others'.
  ScenarioRun(const scenario::Scenario& s, lab::LabState& st, const RunOptions& o,
              const std::atomic<bool>& stop, std::function<void(const std::string&)> progress,
              const HostPart* part = nullptr)
      : s_(s), st_(st), o_(o), stop_(stop), progress_(std::move(progress)), part_(part) {}

  Status prepare();
  Status start_monitors();
  Status start_workload();  // and (on one host) waits, bounded, for its first iterations
  Status start_probes();
  void fire_timeline();
  void collect();
  RunResult summarise();

  // Over several hosts the steps are split where the hosts meet:
  Status wait_iterating();  // the workload's first iterations (every host's ranks)
  Status start_probe_servers();
  Status start_probe_clients(int64_t lead_ns);  // `lead_ns` before the timeline's t0
  void fire_timeline(int64_t t0_ns);
  // A joining host: the coordinator's stop iteration.
  void collect(int64_t stop_iter);
  // A joining host's part for the coordinator: its lab events, route changes and control-plane
  // reactions in the run's window, its probe clients' logs, its errors and warnings (times on
  // its own clock).
  nlohmann::json part_json() const;
  // The coordinator: another host's part, its times shifted by `offset_ns` (that host's clock
  // minus this one's). Before summarise().
  void merge(const std::string& host, const nlohmann::json& part, int64_t offset_ns);

  // Ends the run early, from any thread (a lab over several hosts: a host went away mid-run):
  // the timeline stops as on a stop (the faults in force reverted), collect() ends the ranks at
  // once instead of waiting for them, and `why` is one of the run's errors.
  void cut_short(const std::string& why);

  const std::string& results_dir() const { return res_.results_dir; }
  const std::string& id() const { return id_; }
  SteadyWorkload* workload() { return workload_ ? &*workload_ : nullptr; }
  RunResult& result() { return res_; }

 private:
  Status start_command(const scenario::Workload& w);
  Status start_checkpoints();
  void collect_lab_events();
  void take_lab_event(const nlohmann::json& j);  // into in_ (faults' windows, control)
  void collect_route_changes(
      const std::vector<std::pair<std::string, netlink::RouteChange>>& changes);
  void collect_outages(const std::vector<std::vector<metrics::Interval>>& outages);
  void collect_iterations();
  void collect_congestion();  // the agent's counters over the timeline, its episodes copied
  void write_events();        // events.jsonl, in time order

  const scenario::Scenario& s_;
  lab::LabState& st_;
  const RunOptions& o_;
  const std::atomic<bool>& stop_;
  std::atomic<bool> cut_{false};  // stop_, or cut_short
  std::mutex cut_mu_;
  std::string cut_why_;
  const std::function<void(const std::string&)> progress_;
  const HostPart* part_;

  // prepare
  std::string id_;
  RunResult res_;
  std::vector<fault::Resolved> faults_;  // on the whole lab (every host alike)
  std::vector<fault::Resolved> fire_;    // this host's part of each (what its timeline fires)
  std::vector<fault::Step> steps_;       // of the faults this host holds a part of
  int64_t length_ns_ = 0;                // the last step and the settle time after it
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
  congestion::Counters cg_before_;  // the agent's counters at t0
  // collect
  std::vector<nlohmann::json> events_;  // the run's events.jsonl
  metrics::RecoveryInput in_;
  // Per fault, per host ("" : this one): its last revert (effective, requested).
  std::map<size_t, std::map<std::string, std::pair<int64_t, int64_t>>> last_revert_;
  uint64_t wrong_ = 0;  // wrong elements in the workload's checks
};

}  // namespace tb::experiment
