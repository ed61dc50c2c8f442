#include "verify/host.h"

#include <fmt/format.h>

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "core/clock.h"
#include "core/realtime.h"

namespace tb::verify {

bool parse_proc_stat_cpu(const std::string& line, uint64_t& busy, uint64_t& total) {
  std::istringstream in(line);
  std::string name;
  if (!(in >> name) || name != "cpu") return false;
  uint64_t v[8] = {};
  int n = 0;
  while (n < 8 && in >> v[n]) ++n;
  if (n < 4) return false;
  total = 0;
  for (int i = 0; i < n; ++i) total += v[i];
  const uint64_t idle = v[3] + (n > 4 ? v[4] : 0);  // idle + iowait
  busy = total - idle;
  return true;
}

namespace {

// The first line of `path` starting with `key` (+ a space), its number; -1 when absent.
int64_t read_number(const std::string& path, const std::string& key = "") {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!key.empty()) {
      if (line.rfind(key + " ", 0) != 0) continue;
      line = line.substr(key.size() + 1);
    }
    try {
      return std::stoll(line);
    } catch (const std::exception&) {
      return -1;
    }
  }
  return -1;
}

}  // namespace

int64_t idle_cgroup_ns(const std::string& root) {
  const std::string g = std::string("/") + kIdleCgroup;
  // cgroup v2 (the unified tree at the root, or beside v1 under unified/)
  for (const char* tree : {"", "/unified"}) {
    const std::string d = root + tree + g;
    if (read_number(d + "/cpu.idle") != 1) continue;
    const int64_t us = read_number(d + "/cpu.stat", "usage_usec");
    if (us >= 0) return us * 1000;
  }
  // cgroup v1: cpu.idle in the cpu hierarchy, the time in cpuacct's (often mounted together)
  for (const char* cpu : {"/cpu,cpuacct", "/cpu"}) {
    if (read_number(root + cpu + g + "/cpu.idle") != 1) continue;
    for (const char* acct : {"/cpu,cpuacct", "/cpuacct"}) {
      const int64_t ns = read_number(root + acct + g + "/cpuacct.usage");
      if (ns >= 0) return ns;
    }
  }
  return -1;
}

void add_stage_stats(HostSample& s, const nlohmann::json& stats) {
  if (!stats.is_object()) return;
  if (stats.contains("scheduling") && stats["scheduling"].is_string()) {
    const std::string t = stats["scheduling"];
    if (std::ranges::find(s.scheduling, t) == s.scheduling.end()) s.scheduling.push_back(t);
  }
  if (!stats.contains("queues") || !stats["queues"].is_array()) return;
  for (const auto& q : stats["queues"]) {
    const uint64_t n = q.value("packets", uint64_t{0});
    s.packets += n;
    s.late_sum_us += q.value("late_mean_us", 0.0) * static_cast<double>(n);
    s.late_max_us = std::max(s.late_max_us, q.value("late_max_us", 0.0));
  }
}

HostSample sample_host(const std::vector<std::string>& stage_stats_files) {
  HostSample s;
  std::ifstream stat("/proc/stat");
  std::string line;
  if (std::getline(stat, line)) parse_proc_stat_cpu(line, s.cpu_busy, s.cpu_total);
  s.idle_group_ns = idle_cgroup_ns();
  for (const auto& f : stage_stats_files) {
    std::ifstream in(f);
    add_stage_stats(s, nlohmann::json::parse(in, nullptr, false));
  }
  return s;
}

void add_wakeup(Promptness& p, double late_us) {
  late_us = std::max(0.0, late_us);
  p.late_mean_us += (late_us - p.late_mean_us) / static_cast<double>(++p.wakeups);
  p.late_max_us = std::max(p.late_max_us, late_us);
  if (late_us >= kWatchStallUs && p.seconds > 0) p.stalled_share += late_us / 1e6 / p.seconds;
}

std::string Promptness::text() const {
  return fmt::format(
      "a {} thread waking every {} us woke {:.0f} us late on average, {:.1f} ms at worst; "
      "{:.1f}% of the {:.1f} s stalled (wake-ups >= {:.0f} ms late)",
      scheduling, kWatchPeriodUs, late_mean_us, late_max_us / 1000, stalled_share * 100, seconds,
      kWatchStallUs / 1000);
}

struct PromptnessWatch::State {
  std::atomic<bool> stop{false};
  std::vector<double> late_us;  // the thread's; read after join
  std::string scheduling;
  int64_t t0_ns = 0, t1_ns = 0;
  std::thread thread;
};

PromptnessWatch::PromptnessWatch() : s_(std::make_unique<State>()) {
  State* s = s_.get();
  s->late_us.reserve(1 << 16);
  s->t0_ns = monotonic_ns();
  s->thread = std::thread([s] {
    s->scheduling = try_realtime(kRealtimePriority + 1).text;  // this thread only
    constexpr int64_t period = int64_t{kWatchPeriodUs} * 1000;
    int64_t next = monotonic_ns() + period;
    while (!s->stop.load(std::memory_order_relaxed)) {
      timespec at{static_cast<time_t>(next / 1'000'000'000),
                  static_cast<long>(next % 1'000'000'000)};
      while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
      }
      const int64_t now = monotonic_ns();
      s->late_us.push_back(static_cast<double>(now - next) / 1000);
      next += period;
      if (next <= now) next = now + period;  // missed wake-ups are one lateness, not many
    }
  });
}

Promptness PromptnessWatch::stop() {
  Promptness p;
  if (!s_ || !s_->thread.joinable()) return p;
  s_->stop = true;
  s_->thread.join();
  s_->t1_ns = monotonic_ns();
  p.scheduling = s_->scheduling;
  p.seconds = static_cast<double>(s_->t1_ns - s_->t0_ns) / 1e9;
  for (double l : s_->late_us) add_wakeup(p, l);
  return p;
}

PromptnessWatch::~PromptnessWatch() {
  if (s_ && s_->thread.joinable()) {
    s_->stop = true;
    s_->thread.join();
  }
}

HostLoad host_load(const HostSample& before, const HostSample& after) {
  HostLoad h;
  if (after.cpu_total > before.cpu_total) {
    const auto total = static_cast<double>(after.cpu_total - before.cpu_total);
    double busy = static_cast<double>(after.cpu_busy - before.cpu_busy);
    if (before.idle_group_ns >= 0 && after.idle_group_ns >= before.idle_group_ns) {
      // /proc/stat counts USER_HZ jiffies; the group's time is in ns
      static const double ns_per_jiffy = 1e9 / static_cast<double>(::sysconf(_SC_CLK_TCK));
      const double idle =
          static_cast<double>(after.idle_group_ns - before.idle_group_ns) / ns_per_jiffy;
      h.idle_group = std::min(idle, busy) / total;
      busy = std::max(0.0, busy - idle);
    }
    h.cpu_busy = busy / total;
  }
  if (after.packets > before.packets) {
    h.stage_packets = after.packets - before.packets;
    h.stage_late_mean_us = std::max(
        0.0, (after.late_sum_us - before.late_sum_us) / static_cast<double>(h.stage_packets));
  }
  h.stage_late_max_us = after.late_max_us;
  h.scheduling = after.scheduling;
  h.host_bound = h.cpu_busy >= kHostBusyShare || h.stage_late_mean_us >= kStageLateUs;
  return h;
}

std::vector<LinkShortfall> short_links(const std::vector<LinkInterval>& intervals) {
  std::vector<LinkShortfall> all;
  std::map<std::string, size_t> index;
  std::vector<double> share_sum;
  for (const auto& i : intervals) {
    if (i.faulted || i.emulated_bps <= 0) continue;
    if (i.backlog_start == 0 || i.backlog_end == 0) continue;  // nothing waited throughout
    auto [it, fresh] = index.try_emplace(i.link, all.size());
    if (fresh) {
      all.push_back(LinkShortfall{i.link, i.emulated_bps, 0, 0, 0, 0});
      share_sum.push_back(0);
    }
    auto& l = all[it->second];
    ++l.waiting_intervals;
    const double owed =
        std::min(i.emulated_bps * i.seconds / 8, static_cast<double>(i.backlog_start));
    const double share = owed > 0 ? i.delivered_bps * i.seconds / 8 / owed : 1;
    if (share >= kLinkShortfall) continue;
    ++l.short_intervals;
    share_sum[it->second] += share;
    l.backlog_max = std::max({l.backlog_max, i.backlog_start, i.backlog_end});
  }
  std::vector<LinkShortfall> out;
  for (size_t k = 0; k < all.size(); ++k) {
    auto& l = all[k];
    if (l.short_intervals < kLinkShortIntervals || 2 * l.short_intervals < l.waiting_intervals)
      continue;
    l.delivered_share = share_sum[k] / l.short_intervals;
    out.push_back(l);
  }
  return out;
}

std::string LinkShortfall::text() const {
  return fmt::format(
      "{} (emulated {:.1f} Mbit/s) stalled in {} of {} intervals with bytes queued at both ends: "
      "it sent {:.0f}% of what was queued at the start (queue up to {} B)",
      link, emulated_bps / 1e6, short_intervals, waiting_intervals, delivered_share * 100,
      backlog_max);
}

void add_link_check(HostLoad& h, const std::vector<LinkInterval>& intervals) {
  h.links_checked = true;
  h.links = short_links(intervals);
  if (!h.links.empty()) h.host_bound = true;
}

std::string HostLoad::text() const {
  std::string s = cpu_busy >= 0 ? fmt::format("CPUs {:.0f}% busy", cpu_busy * 100) : "CPU unknown";
  if (idle_group >= 0)
    s += fmt::format(" (not counting {:.0f}% taken by the idle-priority cgroup {})",
                     idle_group * 100, kIdleCgroup);
  if (stage_late_mean_us >= 0)
    s += fmt::format(
        ", delay stages released {} packets {:.1f} us late on average (worst since "
        "start {:.0f} us)",
        stage_packets, stage_late_mean_us, stage_late_max_us);
  else
    s += ", no packet through a delay stage";
  for (const auto& t : scheduling) s += "; stage scheduling " + t;
  for (const auto& l : links) s += "; link short of its rate: " + l.text();
  if (promptness) s += "; " + promptness->text();
  return s;
}

nlohmann::json to_json(const HostLoad& h) {
  nlohmann::json links = nlohmann::json::array();
  for (const auto& l : h.links)
    links.push_back({{"link", l.link},
                     {"emulated_bps", l.emulated_bps},
                     {"short_intervals", l.short_intervals},
                     {"waiting_intervals", l.waiting_intervals},
                     {"delivered_share", l.delivered_share},
                     {"backlog_max_bytes", l.backlog_max},
                     {"text", l.text()}});
  return {
      {"cpu_busy", h.cpu_busy},
      {"idle_group", h.idle_group},
      {"stage_packets", h.stage_packets},
      {"stage_late_mean_us", h.stage_late_mean_us},
      {"stage_late_max_us", h.stage_late_max_us},
      {"stage_scheduling", h.scheduling},
      {"host_bound", h.host_bound},
      {"links_checked", h.links_checked},
      {"promptness", h.promptness ? nlohmann::json{{"wakeups", h.promptness->wakeups},
                                                   {"seconds", h.promptness->seconds},
                                                   {"period_us", kWatchPeriodUs},
                                                   {"late_mean_us", h.promptness->late_mean_us},
                                                   {"late_max_us", h.promptness->late_max_us},
                                                   {"stalled_share", h.promptness->stalled_share},
                                                   {"scheduling", h.promptness->scheduling}}
                                  : nlohmann::json()},
      {"links_short", links},
      {"rule",
       fmt::format("the host is the cause when its CPUs were >= {:.0f}% busy (the cgroup "
                   "testbedctl.idle with cpu.idle 1 not counted), the "
                   "stages released packets >= {:.0f} us late on average, or an "
                   "unfaulted link sent < {:.0f}% of min(the bytes queued in front "
                   "of it, its rate x the interval) in >= {} 0.5 s intervals (and "
                   "at least half of those with bytes queued at both ends)",
                   kHostBusyShare * 100, kStageLateUs, kLinkShortfall * 100, kLinkShortIntervals)},
      {"text", h.text()}};
}

}  // namespace tb::verify
