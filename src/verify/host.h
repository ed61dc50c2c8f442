// Whether the host, rather than the emulation, explains a measurement (`verify --under-load`):
// the CPUs' busy share over the measuring window (/proc/stat) and how late the lab's delay
// stages released packets in that window (their stats files: late_mean_us x packets per queue,
// differenced), with each stage's scheduling. A stage that releases packets late, or CPUs with
// no idle time, add delay the scenario did not ask for: the emulation is not at fault.
// CPU time of the cgroup kIdleCgroup, when its cpu.idle is 1, is not counted as busy: the
// scheduler runs such a group only when nothing else wants a CPU and preempts it on every
// wake-up (measured here, 2026-12-04: two busy loops in it got 5 ms of CPU in 5 s beside two
// ordinary ones in another session — nice and SCHED_IDLE, by contrast, yield only within their
// own autogroup). Not always only that: with one busy ordinary task per CPU the group took
// 9-16% of a 0.2-0.4 s window now and then (3 of 14 runs beside the lab VM's check, 2026-12-06),
// with two per CPU 8.4% once in 32 runs, and /proc/stat's ticks make such a window's share
// coarse (one read 3% short); a window of ~1.5 s with two per CPU read 0.98-1.00 in 10 of 10.
// scripts/test runs the lab VM's -icount timing boot there, beside the tiers.
// Pure except sample_host and idle_cgroup_ns; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tb::verify {

// The host is blamed when its CPUs were this busy over the window ...
inline constexpr double kHostBusyShare = 0.90;
// ... or the stages released packets this late on average (the 20 us of the sub-ms target).
inline constexpr double kStageLateUs = 20;

// The cgroup whose CPU time the guard leaves out (see above): /sys/fs/cgroup/testbedctl.idle
// (cgroup v2) or testbedctl.idle in the v1 cpu and cpuacct hierarchies.
inline constexpr const char* kIdleCgroup = "testbedctl.idle";

struct HostSample {
  uint64_t cpu_busy = 0, cpu_total = 0;  // jiffies, all CPUs (/proc/stat "cpu" line)
  int64_t idle_group_ns = -1;            // CPU time of kIdleCgroup (cpu.idle 1); -1: none
  double late_sum_us = 0;                // sum over the stages' queues of late_mean x packets
  uint64_t packets = 0;                  // packets the stages released
  double late_max_us = 0;                // the worst since each stage started
  std::vector<std::string> scheduling;   // distinct "scheduling" texts of the stages
};

// Stats files are tb-delayd's (lab::stage_stats_path); one that cannot be read is skipped.
HostSample sample_host(const std::vector<std::string>& stage_stats_files);
// Folds one stats document into a sample (pure; the parsing half of sample_host).
void add_stage_stats(HostSample& s, const nlohmann::json& stats);
// "cpu  user nice system idle iowait irq softirq steal ..." -> busy and total jiffies.
bool parse_proc_stat_cpu(const std::string& line, uint64_t& busy, uint64_t& total);
// The CPU time (ns) of kIdleCgroup under `root` (default /sys/fs/cgroup): v2's cpu.stat
// usage_usec or v1's cpuacct.usage, only when the group's cpu.idle reads 1; -1 otherwise.
int64_t idle_cgroup_ns(const std::string& root = "/sys/fs/cgroup");

// The link check: an unfaulted link delivering less than its emulated rate while traffic waits
// for it. One direction of one link over one sampling interval: bytes queued in front of it (the
// sending end's root qdisc backlog) when the interval began and when it ended, and what it
// delivered (the sending end's tx counter). The bytes queued at the start had waited for the
// link; a rate limiter that is given the CPU sends them — or a full interval's worth at its
// rate, whichever is less — before the interval ends. One that sent less stalled.
struct LinkInterval {
  std::string link;         // "a:if -> b:if"
  double emulated_bps = 0;  // 0: unlimited (not judged)
  double delivered_bps = 0;
  double seconds = 0;  // the interval
  uint64_t backlog_start = 0, backlog_end = 0;
  bool faulted = false;  // a fault or live change in force on it: not judged
};

// An interval is short when bytes waited at both its ends and the link delivered less than this
// share of min(the bytes queued at its start, its emulated rate x the interval) ...
inline constexpr double kLinkShortfall = 0.8;
// ... and a link is host-bound evidence when at least this many of its intervals were short and
// they were at least half of its intervals with bytes waiting at both ends.
inline constexpr int kLinkShortIntervals = 2;

struct LinkShortfall {
  std::string link;
  double emulated_bps = 0;
  int short_intervals = 0, waiting_intervals = 0;
  double delivered_share = 0;  // mean over the short intervals, of what it owed (above)
  uint64_t backlog_max = 0;    // the largest queue seen in a short interval
  std::string text() const;
};

// The links that were short (pure): intervals grouped by link, in first-seen order.
std::vector<LinkShortfall> short_links(const std::vector<LinkInterval>& intervals);

// The host's promptness over a window, as cyclictest measures it: a thread of testbedctl wakes
// every kWatchPeriodUs (SCHED_FIFO kRealtimePriority + 1 where the host allows it: ahead of the
// probes and the stages, so neither they nor a CPU hog of ordinary priority delay it) and notes
// how late it woke. What delays it is the host not running its most urgent work: a stall (a
// hypervisor's, RT throttling, a higher real-time task) — over the whole of a reading, the
// goodput transfer included, which the base over lo, taken before it, does not cover.
inline constexpr int kWatchPeriodUs = 1000;
// A wake-up at least this late counts its lateness as time the host stalled.
inline constexpr double kWatchStallUs = 1000;
struct Promptness {
  int64_t wakeups = 0;
  double seconds = 0;  // the window
  double late_mean_us = 0, late_max_us = 0;
  double stalled_share = 0;  // sum of lateness of wake-ups >= kWatchStallUs late / window
  std::string scheduling;    // the watcher's (try_realtime's text)
  std::string text() const;
};
// Folds one wake-up `late_us` late into `p`, whose `seconds` (the window) is set (pure; the
// arithmetic half of PromptnessWatch).
void add_wakeup(Promptness& p, double late_us);

// Starts the watcher thread; stop() (or the destructor) ends it and returns the window's figures.
class PromptnessWatch {
 public:
  PromptnessWatch();
  PromptnessWatch(const PromptnessWatch&) = delete;
  PromptnessWatch& operator=(const PromptnessWatch&) = delete;
  ~PromptnessWatch();
  Promptness stop();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

struct HostLoad {
  double cpu_busy = -1;            // share of all CPUs' time, -1 unknown; kIdleCgroup's left out
  double idle_group = -1;          // share of all CPUs' time kIdleCgroup took, -1 none
  double stage_late_mean_us = -1;  // over the window, -1 when no packet was released
  uint64_t stage_packets = 0;
  double stage_late_max_us = 0;  // since the stages started
  std::vector<std::string> scheduling;
  std::vector<LinkShortfall> links;      // the link check's evidence (add_link_check)
  std::optional<Promptness> promptness;  // verify's readings: the watcher over the window
  bool links_checked = false;            // the link check ran (intervals were sampled)
  // busy >= kHostBusyShare, late mean >= kStageLateUs, or a link short of its rate
  bool host_bound = false;
  std::string text() const;  // one line for people
};

HostLoad host_load(const HostSample& before, const HostSample& after);
// Adds the link check's verdict (short_links) to a window's load.
void add_link_check(HostLoad& h, const std::vector<LinkInterval>& intervals);
nlohmann::json to_json(const HostLoad& h);

}  // namespace tb::verify
