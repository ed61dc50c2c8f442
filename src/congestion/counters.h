// The congestion counters users see (docs/design-congestion.md §5): what `status`, `watch` and
// the bench/train/run reports show of the congestion agent, read from its stats file
// (congestion/stats.h) and named per link end ("node:ifname").
//
// - A polled switch port (an egress queue the agent reads) has `pauses_sent`: the pauses its
//   XOFF asked of the upstream queues feeding it (the sum of its name over every upstream's
//   `by` map), its XOFF events, its backlog's maximum and the qdisc's drops — on a lossless
//   port every such drop is a lossless violation.
// - An upstream (a TBF the agent pauses: a GPU NIC, a ToR's spine port) has `pauses_received`,
//   the time it was paused and whether it is now.
// Every count runs from the agent's start (its uptime); `delta` gives a window's.
//
// Never zeros that look measured: a lab without an agent, an agent with no stats file yet, an
// unreadable file are each a `source` other than kCounted, with `why` in words.
// - An ecn port has `ce_marks`: the ECT packets the delay stage just downstream of it marked CE
//   with the probability the agent published for it (stage/mark_table.h), beside the ECT and
//   Not-ECT packets that stage took; absent on other ports.
//
// Plain values; thread-safe to copy and read.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "congestion/stats.h"

namespace tb::congestion {

inline constexpr const char* kConfigFile = "congestion.json";  // under <lab dir>/stages/
// A stats file older than this while its agent has not said `stopped` is stale (the agent
// rewrites it every 200 ms).
inline constexpr double kStaleAfterS = 2.0;
// How every figure here is measured, for reports.
inline constexpr const char* kCountersSource = "congestion agent stats file";
inline constexpr const char* kCountersBackend =
    "tb-probe congestion: RTM_GETQDISC dumps of each polled switch egress (backlog, drops), "
    "pauses = TBF replaced by 1 B/s, counted by the agent";

enum class Source {
  kCounted,     // the agent's counters (it runs, or stopped and said so: `stopped`)
  kStale,       // counted until `age_s` ago: the agent no longer rewrites its file
  kNoAgent,     // the lab's plan started no agent (no lossless or ecn link)
  kNotRunning,  // the plan has one, but there is no stats file (yet)
  kUnreadable,  // the stats file is not JSON
};
const char* source_name(Source s);  // "counted", "stale", "no agent", "not running", "unreadable"

struct PortCounters {
  std::string model;         // "lossless" or "ecn"
  uint64_t pauses_sent = 0;  // pauses its XOFF asked of its feeders
  uint64_t xoff_events = 0;
  uint64_t backlog = 0, backlog_max = 0;  // bytes; backlog_max since the agent started
  uint64_t drops = 0;                     // the egress qdisc's, since the agent started
  std::optional<uint64_t> ce_marks;       // ECN marks: an ecn port's only
  uint64_t ect = 0, not_ect = 0;          // ecn: the packets its marking stage took
  double marking_p = 0;                   // ecn: the probability it publishes now, 0..1
  std::string marked_by;                  // ecn: "stage" or "red" (the kernel's RED child)
  // A `pfc-storm` fault holds it paused (congestion/control.h), and the PFC watchdog's record:
  // storms it detected, whether it ignores the pause now, and the packets its drop action
  // dropped (part of `drops`, on purpose: not lossless violations).
  bool storm = false;
  uint64_t watchdog_trips = 0;
  bool mitigating = false;
  uint64_t watchdog_dropped = 0;
  bool lossless() const { return model == "lossless"; }
  // Drops at a lossless port that nothing meant: every drop but the watchdog's.
  uint64_t violations() const { return lossless() ? drops - std::min(drops, watchdog_dropped) : 0; }
};
struct UpstreamCounters {
  uint64_t pauses_received = 0;
  int64_t paused_ns = 0;
  bool paused_now = false;
  uint64_t pause_expired = 0;
  std::map<std::string, uint64_t> by;  // pauses per port that asked for them
};

struct Counters {
  Source source = Source::kNoAgent;
  std::string why;   // for every source but kCounted, in words; "" otherwise
  std::string path;  // the stats file read
  int pid = 0;
  double uptime_s = 0;  // what every count here covers
  double age_s = 0;     // how old the file was when read
  bool stopped = false;
  uint64_t late_polls = 0;
  double late_ms_max = 0;
  std::string wake;  // the agent's idle wake (congestion/wake.h), or why it has none
  std::map<std::string, PortCounters> ports;          // by link end, "dc/tor0:s4g0"
  std::map<std::string, UpstreamCounters> upstreams;  // by link end, "dc/s0/g0:rail"
  bool has_counts() const { return source == Source::kCounted || source == Source::kStale; }
};

// The counters of one stats document (pure): pauses_sent from the upstreams' `by` maps.
Counters counters_from_stats(const AgentStats& s);

// The agent of the lab whose directory is `lab_dir`: its config `<dir>/stages/congestion.json`
// says the plan started one, its stats `<dir>/stages/congestion.stats.json` what it counted.
Counters read_counters(const std::string& lab_dir);

// What happened between two reads (pure): `after` with every count less `before`'s, uptime_s the
// time between. When the agent restarted in between (another pid, or its uptime went back), the
// counts are `after`'s own (since that restart) and `why` says so; likewise when there was no
// stats file before (the agent started inside the window). Otherwise, without counts on both
// sides, the result has no counts and `why` says which side lacked them.
Counters delta(const Counters& before, const Counters& after);

// Totals over every port and upstream, for one-line summaries.
struct Totals {
  uint64_t pauses = 0;  // received, over every upstream (= sent, over every port)
  int64_t paused_ns = 0;
  std::string busiest;  // the upstream paused longest ("" when none was)
  int64_t busiest_ns = 0;
  uint64_t xoff_events = 0;
  uint64_t lossless_drops = 0;  // drops at lossless ports but the watchdog's: violations
  uint64_t drops = 0;           // at every polled port
  uint64_t watchdog_trips = 0, watchdog_dropped = 0;
  int storms = 0;  // ports a pfc-storm holds now
  int ports = 0, upstreams = 0;
  int paused_upstreams = 0;  // with at least one pause
  int ecn_ports = 0;
  int red_ports = 0;               // of them, marked by the kernel's RED (no ECT count)
  uint64_t ce_marks = 0, ect = 0;  // over the ecn ports
};
Totals totals(const Counters& c);

// {"source", "backend", "state", "why"?, "uptime_s", "pid", "stopped", "late_polls",
//  "ports": {end: {...}}, "upstreams": {end: {...}}, "totals": {...}}; a window's (delta) the
// same with "window_s" for "uptime_s".
nlohmann::json to_json(const Counters& c, bool window = false);
// One line: "pauses 1,190 (paused 2.31 s in all, busiest dc/s0/g0:rail 0.62 s), 595 XOFF
// events, 0 lossless drops, over 6.5 s (congestion agent stats file)" (and the PFC watchdog's
// trips and drops, the storms held, when there are any); or why there are none.
std::string summary_line(const Counters& c);

}  // namespace tb::congestion
