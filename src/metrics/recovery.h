// Recovery analysis of a run: for each fault on the timeline, from timestamps on the one
// monotonic clock (events.jsonl, probe outages, workload iterations):
//   detection   first control-plane reaction after the fault (a route withdrawn or added in a
//               watched namespace, a BFD session down, the failover agent switching, the PFC
//               watchdog's pfcwd_detect); none when nothing reacted (static routes). For a
//               pfc-storm only pfcwd_detect counts (a storm changes no route)
//   reroute     first route installed or withdrawn after the fault (traffic has a new path),
//               a spine host route by the fabric agent included
//   outage      the longest run of lost probes on the fault's path that began after it
//               (data plane); `recovered` when it ended before the fault was repaired
//   stall       workload: the gap between the last iteration completed before the fault and
//               the first completed after it, less one baseline iteration
//   degraded    baseline iteration time / mean iteration time while the fault lasted
// Baseline = median iteration time before the first fault. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tb::metrics {

struct FaultWindow {
  int id = 0;
  std::string kind, target;
  int64_t inject_ns = 0;            // when the fault was in force
  int64_t requested_ns = 0;         // when injecting it began (control events count from here)
  int64_t revert_ns = 0;            // 0: never reverted during the run
  int64_t revert_requested_ns = 0;  // control events from here on belong to the repair
};

struct ControlEvent {
  int64_t t_ns = 0;
  std::string what;   // "route_del", "route_add", "bfd_down", "agent_switch", ...
  std::string where;  // namespace or node
  std::string detail;
};

struct Interval {
  int64_t a = 0, b = 0;
};

struct Iteration {
  int64_t start_ns = 0, end_ns = 0;
};

struct FaultRecovery {
  FaultWindow fault;
  std::optional<double> detection_ms, reroute_ms, outage_ms, stall_ms, degraded_fraction;
  bool recovered_before_repair = false;  // the outage ended before the revert
  int64_t outage_end_ns = 0;             // when that outage ended (probes through again)
  std::string detected_by;               // the control event that counted as detection
  int iterations_during = 0;
};

struct RecoveryInput {
  std::vector<FaultWindow> faults;
  std::vector<ControlEvent> control;
  std::vector<std::vector<Interval>> outages;  // per fault: the outages on its probed path
  std::vector<bool> probed;                    // per fault: whether any path was probed
  std::vector<Iteration> iterations;           // the workload's, in order
  int64_t run_end_ns = 0;
};

struct RecoveryReport {
  std::optional<double> baseline_iter_ms;
  std::vector<FaultRecovery> faults;
  double max_stall_ms() const;
  std::optional<double> max_detection_ms() const;
  std::optional<double> max_outage_ms() const;
};

RecoveryReport analyze(const RecoveryInput& in);
nlohmann::json to_json(const RecoveryReport& r);

}  // namespace tb::metrics
