// The `checkpoint` workload of `run` (docs/scenario.md "workload"): a checkpoint replicated from
// one region's servers to another's over the WAN, with real bytes, on a cadence, beside the run's
// collective or command workload and under its fault timeline.
//
// Each server of `from` holds one shard (the checkpoint's emulated size, bytes / [scale]
// bandwidth, split evenly); shard i goes to server i mod n of `to`, where a receiver
// (`tb-probe ckpt-recv`) rebuilds it under <results>/checkpoint/<workload>/. Replication k starts
// when it is due (k x `every`, or once the run's collective, command or training workload has
// done k x `every` steps) and never overlaps the one before: one `tb-probe ckpt-send` per shard,
// all at once, each with `streams` TCP streams marked with the workload's QoS class's DSCP. A
// replication is ok when every shard's checksum matched at both ends; on time when it ended
// before the next was due ((k+1) x `every`, or (k+1) x `every` steps done). Per replication:
// bytes, duration (first start to last end), WAN utilisation (bytes x 8 / duration / the primary
// WAN link's emulated rate between the regions, as planned) and whether it kept up; per workload,
// the run's workload's iterations while a replication was in flight and while none was
// (split_steps), so a checkpoint's cost to training is a figure.
//
// On a lab over several hosts (experiment/across_hosts.h) each host runs its part: receivers in
// the destination servers it holds (start_receivers, before any host's sender starts), senders
// of the shards whose source server it holds, on a cadence from the run's t0 (begin: every host
// the same t0, so replication k is due at t0 + k x `every` everywhere; none is due at or after
// the timeline's end), and its replications (to_part) go to the coordinator, which merges them
// by number (merge_part) and judges them as on one host. A host's receivers stay up until its
// destructor (the caller keeps it until every host's senders ended: stop(keep_receivers)).
//
// Thread-safe: start/stop/results from one thread; the cadence runs on an internal one.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "lab/state.h"
#include "metrics/recovery.h"
#include "scenario/model.h"

namespace tb::experiment {

// One shard of a replication as its sender reported it.
struct CheckpointShard {
  int shard = 0;
  std::string from, to;  // server nodes
  uint64_t payload = 0;
  uint64_t checksum = 0, receiver_checksum = 0;  // FNV-1a 64 of the whole shard at both ends
  bool ok = false;
};

struct CheckpointRep {
  int rep = 0;
  bool full = false;
  uint64_t payload = 0;  // block bytes sent, all shards
  uint64_t wire = 0;     // bytes written to sockets (headers and block indices too)
  int64_t due_ns = 0, start_ns = 0, end_ns = 0;  // CLOCK_MONOTONIC
  double seconds = 0;
  double wan_utilisation = 0;  // payload x 8 / seconds / the WAN link's emulated rate
  bool ok = false;             // every shard's checksum matched at both ends
  bool on_time = true;         // ended before the next replication was due
  std::string error;
  std::vector<CheckpointShard> shards;  // those that printed a result, by shard number
};

// A replication as JSON (times as they are) and back; merge: `b` (another host's shards of the
// same replication, times on this clock) into `a` — bytes and shards added, the first start and
// the last end, ok and on time only when both are; wan_utilisation is left to the caller (it
// knows the WAN's rate). Pure.
nlohmann::json rep_to_json(const CheckpointRep& r);
CheckpointRep rep_from_json(const nlohmann::json& j);
void merge_rep(CheckpointRep& a, const CheckpointRep& b);

// What a workload's replication needs at best: its full size over the primary WAN's rate.
struct CheckpointPlan {
  std::vector<std::string> sources, destinations;  // server nodes, shard i: sources[i]
  uint64_t shard_bytes = 0;
  uint64_t emulated_bytes = 0;  // the whole checkpoint, as replicated
  std::string wan;              // the primary WAN link between the regions ("" = none)
  double wan_bps = 0;           // its emulated rate (0 = unlimited)
  int dscp = 0;
  double min_seconds = 0;  // average bytes per replication x 8 / wan_bps (0 when unlimited)
  std::string warning;     // the cadence cannot keep up, in numbers; "" when it can
};

// The plan of workload `w` on `st` (exit-2 errors: a region without servers, a cadence in steps
// in a scenario with no collective, command or training workload to count them).
Result<CheckpointPlan> plan_checkpoint(const scenario::Scenario& s, const scenario::Workload& w,
                                       const lab::LabState& st);

// The run's workload iterations split by whether a replication was in flight: an iteration
// counts as "during" when it overlaps some replication (started before its end, ended after its
// start), else "outside". Medians of the iterations' durations (first start to last end over
// ranks), 0 when there are none. Pure.
struct StepSplit {
  int during = 0, outside = 0;
  double during_ms = 0, outside_ms = 0;  // medians
};
StepSplit split_steps(const std::vector<metrics::Iteration>& iterations,
                      const std::vector<CheckpointRep>& reps);

class CheckpointWorkload {
 public:
  // `wait_steps(n, timeout_ns, stop)`: true once the run's workload has completed n iterations,
  // waiting up to timeout_ns for it (0: only asks; false when it has not, or never will);
  // needed when the cadence is in steps.
  using WaitSteps = std::function<bool(int64_t, int64_t, const std::atomic<bool>&)>;
  CheckpointWorkload(const scenario::Scenario& s, const scenario::Workload& w,
                     const lab::LabState& st, CheckpointPlan plan, std::string results_dir,
                     std::string tb_probe, std::string events_path, WaitSteps wait_steps = {})
      : s_(s),
        w_(w),
        st_(st),
        plan_(std::move(plan)),
        dir_(std::move(results_dir)),
        tb_probe_(std::move(tb_probe)),
        events_(std::move(events_path)),
        wait_steps_(std::move(wait_steps)) {}
  ~CheckpointWorkload();

  // Receivers up and answering, then the cadence starts (replication 0 now).
  Status start();
  // Over several hosts: the receivers of the destinations on this host (st.host), up and
  // answering; then begin(t0, end): the senders of the sources on this host, replication k due
  // at t0_ns + k x `every`, none due at or after end_ns (0: no end). No thread when this host
  // holds no source.
  Status start_receivers();
  void begin(int64_t t0_ns, int64_t end_ns);
  // No replication starts after this; the one in flight finishes (bounded by its own timeout);
  // receivers end unless `keep_receivers` (the destructor ends them). Errors: replications that
  // failed.
  void stop(std::vector<std::string>* errors, bool keep_receivers = false);
  // This host's replications for the coordinator; the coordinator merges another host's (times
  // shifted by `offset_ns`, that host's clock minus this one's), after stop().
  nlohmann::json to_part() const;
  void merge_part(const nlohmann::json& part, int64_t offset_ns);
  std::vector<CheckpointRep> reps() const;
  const CheckpointPlan& plan() const { return plan_; }
  const scenario::Workload& workload() const { return w_; }
  // The workload's figures and replications; `iterations`: the run's workload's (split_steps),
  // none when the run had no stepping workload.
  nlohmann::json to_json(const std::vector<metrics::Iteration>& iterations) const;

 private:
  void cadence(int64_t t0, int64_t end_ns);
  bool here(const std::string& node) const;
  CheckpointRep replicate(int rep, int64_t due_ns);

  const scenario::Scenario& s_;
  const scenario::Workload& w_;
  const lab::LabState& st_;
  const CheckpointPlan plan_;
  const std::string dir_, tb_probe_, events_;
  const WaitSteps wait_steps_;
  uint16_t port_ = 0;
  std::vector<int> receivers_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::vector<CheckpointRep> reps_;
};

}  // namespace tb::experiment
