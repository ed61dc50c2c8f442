// The delay stage's statistics: what the kernel says about each queue
// (/proc/net/netfilter/nfnetlink_queue, per network namespace), the process's CPU time, and the
// JSON document tb-delayd rewrites atomically every interval.
//
// Stats file (one object):
//   {"pid", "uptime_s", "cpu_user_s", "cpu_sys_s", "packets", "bytes", "cpu_us_per_packet",
//    "reloads", "generation", "reload_error", "scheduling", "calibrated",
//    "timer": {"advance_us", "oversleep_p90_us", "spin_s", "spins", "spin_budget_spent"},
//    "release": {"us", "p90_us", "source", "probes", "rejected", "lost", "method", "note"},
//    "queues": [{"num", "delay_us", "jitter_us", "maxlen",
//    "packets", "bytes", "held", "held_max", "late_mean_us", "late_max_us", "drops_full",
//    "flushed", "kernel_total", "kernel_dropped", "kernel_user_dropped",
//    "overhead_us", "queue_latency_us", "release_us", "stamped",
//    and on a marking queue "mark", "ect", "ce_marked", "not_ect"}], "mark_table_error"?}
// A marking queue (ECN, mark_table.h) counts the ECT packets it took, those it marked CE and the
// Not-ECT ones it passed unmarked, since the stage started.
// Calibration (calibration.h): overhead_us is what the stage takes out of each packet's delay
// for its own cost — queue_latency_us (median, kernel stamp to read) + release_us; stamped counts
// the packets that carried a kernel stamp (the others used the median). All 0 when
// "calibrated" is false. timer: advance_us is how early the stage wakes before a deadline to
// spin the rest (0: spinning off or budget spent), spin_s the CPU time spent spinning,
// spin_budget_spent the 100 ms periods in which the 5% budget ran out. release: the release
// cost the stage takes out of every delay, us = the median of its last 32 loopback probes
// (calibration.h ReleaseCalibration), source "probe"; or source "constant" (kReleaseCostNs)
// before the first probe or where probing is impossible, with "note" saying why. probes counts
// the believed ones, rejected those out of bounds, lost those that never came back.
// kernel_dropped: the kernel refused packets because the queue held maxlen (or, fail-closed,
// because no listener was bound); kernel_user_dropped: it could not hand them to us (receive
// buffer overrun). Both are -1 when the /proc file has no line for the queue. "generation" and
// "reload_error" go together: the config generation last read and what became of it.
//
// Pure functions except read_proc_nfqueue, and process_cpu; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"
#include "stage/calibration.h"
#include "stage/delay_line.h"

namespace tb::stage {

inline constexpr const char* kProcNfqueue = "/proc/net/netfilter/nfnetlink_queue";

// One line of /proc/net/netfilter/nfnetlink_queue (net/netfilter/nfnetlink_queue.c seq_show:
// queue_num peer_portid queue_total copy_mode copy_range queue_dropped queue_user_dropped
// id_sequence 1).
struct KernelQueueStats {
  uint32_t portid = 0;
  uint32_t total = 0;  // packets waiting for a verdict (all of ours are)
  uint64_t dropped = 0;
  uint64_t user_dropped = 0;
  uint32_t id_sequence = 0;
};
std::map<uint16_t, KernelQueueStats> parse_proc_nfqueue(std::string_view text);
// Reads kProcNfqueue in the caller's namespace; empty when it cannot be read.
std::map<uint16_t, KernelQueueStats> read_proc_nfqueue();

struct ProcessStats {
  int pid = 0;
  double uptime_s = 0;
  double cpu_user_s = 0;
  double cpu_sys_s = 0;
  uint64_t reloads = 0;      // SIGHUP re-reads that were applied
  std::string reload_error;  // why that read was refused, in part or whole ("" when it was not)
  std::string scheduling;    // e.g. "SCHED_FIFO 10", or SCHED_OTHER and why (StageOptions)
  uint64_t generation = 0;   // "# generation N" of the config last read (queue_spec.h), which
                             // reload_error is the result of
  bool calibrated = false;
  struct Timer {
    double advance_us = 0;
    double oversleep_p90_us = 0;
    double spin_s = 0;
    uint64_t spins = 0;
    uint64_t budget_spent = 0;
  } timer;
  struct Release {
    double us = static_cast<double>(kReleaseCostNs) / 1e3;
    double p90_us = 0;
    bool measured = false;
    uint64_t probes = 0;
    uint64_t rejected = 0;
    uint64_t lost = 0;
    std::string note;
  } release;
};
ProcessStats::Timer timer_stats(const WakeTimer& timer);
ProcessStats::Release release_stats(const ReleaseCalibration& release, const std::string& note);
// getrusage(RUSAGE_SELF) user and system time.
void process_cpu(ProcessStats& out);

struct QueueMarks {
  int slot = -1;
  uint64_t ect = 0, ce = 0, not_ect = 0;
};
nlohmann::json stats_json(const std::map<uint16_t, DelayLine>& lines,
                          const std::map<uint16_t, KernelQueueStats>& kernel,
                          const ProcessStats& process,
                          const std::map<uint16_t, QueueMarks>& marks = {});

}  // namespace tb::stage
