// The congestion agent's decisions (docs/design-congestion.md §3.3-§3.5), without I/O: each
// poll hands it what the dumps showed (every polled egress queue's backlog, every upstream's
// rx counter at the switch port it feeds and, where its namespace was dumped, its TBF's rate)
// and the time; it answers which upstream TBFs to pause and which to resume, and when to poll
// next. Time is the caller's (CLOCK_MONOTONIC in the agent, synthetic in the tests).
//
// - Hysteresis per lossless port: above xoff it is in XOFF (one xoff_event), below xon it leaves.
// - paused_by per upstream: the ports in XOFF that paused it; it resumes when that set is empty,
//   i.e. when every port that paused it is below its XON.
// - Activity filter: a port in XOFF pauses only the feeders that received at least 1% of their
//   rate at the switch over the last 4 ms (or the last poll interval, when longer), or were
//   resumed within that window; a feeder already paused (by another port) is added to the set.
// - Hop by hop: an upstream that is itself a polled port (a ToR's `sp<K>`) fills while paused
//   and pauses its own feeders through the same rules; nothing else is special about it.
// - Pause quantum: a pause not refreshed (confirmed by a poll) within its quantum expired, as
//   802.1Qbb's does when a switch stops refreshing it; a late agent resumes it on waking and
//   counts pause_expired; it may be paused again from the next poll on.
// - Ownership: a paused upstream whose TBF shows another rate than the pause's is paused again;
//   one the agent did not pause but found at the pause rate (a killed agent's leftover) is
//   resumed.
// - Adaptive interval: `poll_ns` while a queue holds more than a quarter of its xoff, a port is
//   in XOFF or an upstream paused, a storm is held or mitigated, and for 50 ms after;
//   `idle_poll_ns` otherwise.
// - Storms (a `pfc-storm` fault, docs/design-congestion.md §6): a port asked to be held paused
//   from outside (set_storm: the NIC behind it keeps sending PFC pauses) has its own TBF paused
//   (PortCommand kHold) until the storm is lifted (kRelease). Only a port that is not also an
//   upstream can be stormed (a ToR port facing a GPU): the agent's own pauses of an upstream
//   and an external one never share a TBF.
// - Watchdog (SONiC's pfcwd, Juniper's defaults): a held port whose queue holds bytes and whose
//   TBF sent nothing (past the pause's one-frame leak) for `watchdog_ns` is a storm: a detect
//   event, then for `restore_ns` its pause is ignored (kMitigate: its rate back and, with the
//   drop action, a 1-byte limit so arrivals are dropped while what it holds drains); then a
//   restore event and, while the storm lasts, it is held again (kHold) and detected again.
//   The watchdog judges only held ports: a busy port that sends is never a storm, and the
//   agent's own pauses end by XON or by their quantum.
//
// Plain values; PauseMachine is not thread-safe (one agent thread drives it).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tb::congestion {

// The rate a paused TBF runs at (bytes per second): TBF's smallest, so the leak is its bucket.
inline constexpr uint64_t kPauseRate = 1;
// The activity filter's window and threshold (design §3.4).
inline constexpr int64_t kActivityWindowNs = 4'000'000;
inline constexpr double kActivityShare = 0.01;
// How long a namespace stays on the fast poll after its queues went quiet.
inline constexpr int64_t kFastHoldNs = 50'000'000;

struct PauseConfig {
  struct Port {
    bool lossless = true;        // only lossless ports pause; ecn ports are only polled
    uint64_t xoff = 0, xon = 0;  // lab bytes
    std::vector<int> feeders;    // indices into upstreams
    int upstream = -1;           // its index in upstreams when it is one too: never stormed
    bool ecn = false;            // an ecn port: its marking probability follows its backlog
    uint64_t kmin = 0, kmax = 0;
    double pmax = 0;
  };
  struct Upstream {
    uint64_t rate = 0;       // bytes per second in force (the activity filter's 1%)
    int64_t quantum_ns = 0;  // 0: never expires
  };
  int64_t poll_ns = 1'000'000;
  int64_t idle_poll_ns = 10'000'000;
  int64_t watchdog_ns = 0;           // a held port stalled this long is a storm; 0: no watchdog
  int64_t restore_ns = 200'000'000;  // how long the watchdog then ignores its pause
  bool watchdog_drop = true;         // "drop": arrivals are dropped while it mitigates
  std::vector<Port> ports;
  std::vector<Upstream> upstreams;
};

// One polled egress queue as a dump showed it.
struct PortSample {
  bool seen = false;  // false: its qdisc was not in the dump (treated as unchanged)
  uint64_t backlog = 0;
  uint64_t bytes = 0;     // sent by its qdisc (a counter): the watchdog's progress
  uint64_t drops = 0;     // dropped by its qdisc (a counter): the watchdog's `dropped`
  uint64_t tbf_rate = 0;  // its TBF's rate: ownership of a held port, a killed agent's leftover
};
// One upstream as the dumps showed it.
struct UpstreamSample {
  bool rx_seen = false;
  uint64_t rx_bytes = 0;  // the switch port it feeds: bytes received (a counter)
  uint64_t tbf_rate = 0;  // its TBF's rate where its namespace was dumped this poll; 0: not seen
};

enum class Reason {
  kXoff,       // pause: a port it feeds passed XOFF
  kXon,        // resume: every port that paused it is below XON
  kExpired,    // resume: the pause outlived its quantum (a late agent)
  kOwnership,  // pause again: its TBF showed another rate while paused
  kLeftover,   // resume: found at the pause rate without being paused (a killed agent's)
};
const char* reason_name(Reason r);

struct Command {
  int upstream = 0;
  bool pause = false;  // false: resume (restore the rate in force, then kick)
  Reason reason = Reason::kXoff;
  int by = -1;  // kXoff: the port that asked for the pause
};

// What to do with a polled port's own TBF (storms and the watchdog).
enum class PortAction {
  kHold,      // the pause rate with its own limit (a storm holds it)
  kRelease,   // its rate and limit back, then a kick (storm lifted, leftover, watchdog done)
  kMitigate,  // its rate back (limit 1 byte with the drop action), then a kick
};
const char* action_name(PortAction a);
struct PortCommand {
  int port = 0;
  PortAction action = PortAction::kHold;
};
// A watchdog event for events.jsonl: pfcwd_detect {port, paused_ms} or pfcwd_restore.
struct WatchdogEvent {
  int port = 0;
  bool detect = true;     // false: restore
  int64_t paused_ns = 0;  // detect: how long the port had been held
  uint64_t dropped = 0;   // restore: what the mitigation dropped
};

struct PortState {
  bool xoff = false;
  uint64_t backlog = 0, backlog_max = 0;
  uint64_t xoff_events = 0;
  // Storm and watchdog.
  bool storm = false;       // asked to be held (set_storm)
  bool held = false;        // its TBF is at the pause rate for the storm
  bool mitigating = false;  // the watchdog ignores its pause until mitigate_until
  int64_t held_at = 0, stall_since = 0, mitigate_until = 0;
  bool bytes_known = false;  // the first sample after a hold carries its leak
  uint64_t bytes_last = 0, drops_last = 0, drops_at = 0;
  uint64_t trips = 0, dropped = 0;  // dropped: in closed mitigations
  uint64_t storm_repaused = 0, leftovers = 0;
  // ecn: the marking probability of the last sample (stage/mark_table.h mark_probability).
  uint32_t marking_p = 0;
};
struct UpstreamState {
  bool paused = false;
  std::vector<int> paused_by;  // ports (sorted, unique)
  int64_t paused_at = 0, refreshed_at = 0;
  int64_t paused_ns = 0;  // total, closed pauses
  uint64_t pauses = 0, pause_expired = 0, repaused = 0, leftovers = 0;
  // Activity filter.
  bool rx_known = false;
  uint64_t rx_last = 0;
  int64_t rx_last_at = 0, active_at = INT64_MIN / 2;
};

class PauseMachine {
 public:
  explicit PauseMachine(PauseConfig config);

  // One poll at `now_ns`: one sample per port and per upstream (sizes as in the config). The
  // commands are valid until the next call; the caller carries them out before polling again.
  const std::vector<Command>& step(int64_t now_ns, std::span<const PortSample> ports,
                                   std::span<const UpstreamSample> upstreams);
  // Resumes every paused upstream (the agent stopping): the commands to carry out; port_commands()
  // then releases every held or mitigating port.
  const std::vector<Command>& resume_all(int64_t now_ns);
  // A storm on `port` from the next step on (on) or lifted (off). The port must not be an upstream.
  void set_storm(int port, bool on);
  // The last step's (or resume_all's) port commands and watchdog events, valid until the next.
  const std::vector<PortCommand>& port_commands() const { return port_out_; }
  const std::vector<WatchdogEvent>& watchdog_events() const { return wd_out_; }
  // Dropped while mitigating so far, the open mitigation included.
  uint64_t dropped(int port) const;
  // When to poll next after a poll at `now_ns`: fast or idle.
  int64_t interval_ns(int64_t now_ns) const;
  bool fast(int64_t now_ns) const { return now_ns < fast_until_; }
  // Bytes that may still be offered to `port` (on top of its backlog at the last step) before
  // a step could see it past its fast threshold (a quarter of xoff, or of kmin for an ecn port):
  // while no port's offered bytes since its last sample reach this, a step would decide
  // nothing new (congestion/wake.h). 0 when it is there already.
  uint64_t wake_headroom(int port) const;

  const PauseConfig& config() const { return config_; }
  const std::vector<PortState>& ports() const { return ports_; }
  const std::vector<UpstreamState>& upstreams() const { return ups_; }
  // Time paused so far, the open pause included.
  int64_t paused_ns(int u, int64_t now_ns) const;

 private:
  bool active(const UpstreamState& u, int64_t now_ns, int64_t interval) const;
  void pause(int u, int by, int64_t now, Reason why);
  void resume(int u, int64_t now, Reason why);
  void hold(int p, int64_t now);
  bool storms(int64_t now, std::span<const PortSample> ports);  // true: some port held/mitigating

  PauseConfig config_;
  std::vector<PortState> ports_;
  std::vector<UpstreamState> ups_;
  std::vector<Command> out_;
  std::vector<PortCommand> port_out_;
  std::vector<WatchdogEvent> wd_out_;
  std::vector<char> touched_;  // upstreams acted on this poll
  int64_t last_poll_ = INT64_MIN / 2;
  int64_t fast_until_ = INT64_MIN / 2;
};

}  // namespace tb::congestion
