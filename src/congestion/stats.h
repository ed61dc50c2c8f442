// The congestion agent's stats file, `<lab dir>/stages/congestion.stats.json`, rewritten
// atomically (core/safe_file.h) about every 200 ms and once more when the agent exits
// (docs/design-congestion.md §5). Its format, the writer's document and the reader's.
//
//   {"pid", "uptime_s", "cpu_s", "sched", "polls", "late_polls", "late_ms_max", "poll_ms_p99",
//    "wake", "wake_checks", "wakes", "errors", "last_error", "stopped",
//    "generation", "control_error", "control_applied_ns",   (congestion/control.h's answer)
//    "ports": {"dc/tor0:s4g0": {"model", "backlog", "backlog_max", "drops", "xoff_events",
//                               "storm", "watchdog": {"trips", "mitigating", "dropped"},
//                               ecn ports: "ecn": {"marking_p", "ect", "ce_marks", "not_ect"}}},
//    "upstreams": {"dc/s0/g0:rail": {"pauses", "paused_ns", "paused_now", "pause_expired",
//                                    "repaused", "leftovers", "by": {"dc/tor0:s4g0": n}}}}
//
// Plain values; thread-safe to copy and read.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"

namespace tb::congestion {

inline constexpr const char* kStatsFile = "congestion.stats.json";  // under <lab dir>/stages/

struct PortStats {
  std::string model;
  uint64_t backlog = 0, backlog_max = 0;
  uint64_t drops = 0;  // the egress qdisc's drop counter since the agent started
  uint64_t xoff_events = 0;
  bool storm = false;  // a pfc-storm holds it (congestion/control.h)
  struct Watchdog {
    uint64_t trips = 0;       // storms detected
    bool mitigating = false;  // its pause ignored now
    uint64_t dropped = 0;     // dropped while mitigating (the drop action)
  } watchdog;
  // An ecn port (stage/mark_table.h): the probability it publishes now (0..1), and what the
  // stage just downstream counted in its slot since the agent started: ECT packets, those marked
  // CE, Not-ECT ones passed unmarked.
  // Where the kernel has RED (`marked_by` "red"), its child of the port's TBF marks: ce_marks is
  // RED's own count (tc_red_xstats.marked) and the stage's figures stay 0.
  struct Ecn {
    double marking_p = 0;
    uint64_t ect = 0, ce_marks = 0, not_ect = 0;
    std::string marked_by = "stage";  // "stage" or "red"
  } ecn;
};
struct UpstreamStats {
  uint64_t pauses = 0;
  int64_t paused_ns = 0;
  bool paused_now = false;
  uint64_t pause_expired = 0, repaused = 0, leftovers = 0;
  std::map<std::string, uint64_t> by;  // pauses per port that asked for them
};
struct AgentStats {
  int pid = 0;
  double uptime_s = 0, cpu_s = 0;
  std::string sched;  // "SCHED_FIFO 11" or why not
  uint64_t polls = 0, late_polls = 0;
  double late_ms_max = 0, poll_ms_p99 = 0;
  // The idle wake (congestion/wake.h): what it is ("cls_bpf byte counters on N ports") or why
  // there is none ("none: ..."), how often the agent read the counters between polls, and how
  // many polls the counters asked for.
  std::string wake;
  uint64_t wake_checks = 0, wakes = 0;
  uint64_t errors = 0;
  std::string last_error;
  bool stopped = false;  // written by an agent that resumed everything and exited
  // The control document (congestion/control.h) it last read: its generation, why it refused
  // part of it ("" when it took it whole), and when it carried it out (CLOCK_MONOTONIC ns).
  uint64_t generation = 0;
  std::string control_error;
  int64_t control_applied_ns = 0;
  std::map<std::string, PortStats> ports;
  std::map<std::string, UpstreamStats> upstreams;
};

nlohmann::json to_json(const AgentStats& s);
AgentStats stats_from_json(const nlohmann::json& j);  // missing keys stay at their defaults
// The stats file at `path`; an error when it is missing or not JSON.
Result<AgentStats> read_stats(const std::string& path);

}  // namespace tb::congestion
