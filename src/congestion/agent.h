// The congestion agent's run loop (`tb-probe congestion`, docs/design-congestion.md §3): it
// polls every switch egress queue of its plan::CongestionAgent with one RTM_GETQDISC dump and one
// RTM_GETSTATS dump per polled switch namespace, hands what it read to a PauseMachine
// (congestion/pause.h) and carries out its commands: a pause replaces the upstream TBF by
// kPauseRate with a one-frame burst (the leak is at most that frame), a resume restores the
// TbfOptions in force and kicks (congestion/kick.h: a restore alone does not dequeue until a
// TCP RTO). One netlink socket per namespace it touches, opened inside it at start.
//
// Scheduling: SCHED_FIFO kAgentPriority, one above the delay stages (a busy-waiting stage at
// the same priority held back its polls), where the host allows; clock_nanosleep to absolute
// deadlines, a missed period is counted, not caught up. At start every upstream found at the
// pause rate (a killed agent's) is resumed and kicked; when `stop` is set it resumes everything
// it paused and returns. Its stats file (congestion/stats.h) is rewritten about every 200 ms; the
// pause episodes that closed meanwhile are appended to its episode log then
// (congestion/episodes.h).
//
// Storms (a `pfc-storm` fault): the control document (congestion/control.h) is read at start and
// whenever `reload` is set (tb-probe sets it on SIGHUP); each storm port's own TBF is then held
// at the pause rate (its one-frame leak as an upstream's) until the document lifts it; the
// watchdog (congestion/pause.h) mitigates a held port that stalls, each detect and restore an
// event (`pfcwd_detect`, `pfcwd_restore`) in the lab's events.jsonl. The answer (generation,
// control_error, control_applied_ns) is written to the stats file as soon as it is carried out.
//
// Not thread-safe: one thread runs it.
#pragma once

#include <atomic>
#include <string>

#include "core/error.h"
#include "core/realtime.h"
#include "plan/daemon.h"

namespace tb::congestion {

inline constexpr int kAgentPriority = kRealtimePriority + 1;
inline constexpr int64_t kStatsEveryNs = 200'000'000;

struct AgentOptions {
  std::string stats_path;  // "" writes none
  // The pause-episode timeline (congestion/episodes.h), appended as episodes close; "" none.
  std::string episodes_path;
  std::string control_path;  // "" reads none (congestion/control.h)
  std::string events_path;   // "" writes no watchdog events
  bool realtime = true;      // try SCHED_FIFO kAgentPriority
  // Set (by a signal handler) to re-read the control document; the agent clears it.
  std::atomic<bool>* reload = nullptr;
};

// Runs until `stop`; an error only when it cannot start (a namespace or interface missing).
Status run_congestion_agent(const plan::CongestionAgent& config, const AgentOptions& options,
                            const std::atomic<bool>& stop);

}  // namespace tb::congestion
