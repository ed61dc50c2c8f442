// Delay-stage statistics (stats.h).
#include "stage/stats.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace tb::stage {
namespace {

double us(int64_t ns) {
  return static_cast<double>(ns) / 1e3;
}

double seconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

}  // namespace

std::map<uint16_t, KernelQueueStats> parse_proc_nfqueue(std::string_view text) {
  std::map<uint16_t, KernelQueueStats> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    unsigned num = 0, portid = 0, total = 0, mode = 0, range = 0, idseq = 0;
    unsigned long long dropped = 0, user_dropped = 0;
    if (std::sscanf(line.c_str(), "%u %u %u %u %u %llu %llu %u", &num, &portid, &total, &mode,
                    &range, &dropped, &user_dropped, &idseq) != 8 ||
        num > 65535)
      continue;
    out[static_cast<uint16_t>(num)] = {portid, total, dropped, user_dropped, idseq};
  }
  return out;
}

std::map<uint16_t, KernelQueueStats> read_proc_nfqueue() {
  std::ifstream f(kProcNfqueue);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_proc_nfqueue(ss.str());
}

void process_cpu(ProcessStats& out) {
  rusage ru{};
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return;
  out.cpu_user_s = seconds(ru.ru_utime);
  out.cpu_sys_s = seconds(ru.ru_stime);
}

ProcessStats::Timer timer_stats(const WakeTimer& timer) {
  ProcessStats::Timer t;
  t.advance_us = static_cast<double>(timer.current_advance_ns()) / 1e3;
  t.oversleep_p90_us = static_cast<double>(timer.oversleep_p90().value_or(0)) / 1e3;
  t.spin_s = static_cast<double>(timer.spin_ns_total()) / 1e9;
  t.spins = timer.spins();
  t.budget_spent = timer.budget_exhausted();
  return t;
}

ProcessStats::Release release_stats(const ReleaseCalibration& release, const std::string& note) {
  ProcessStats::Release r;
  r.us = us(release.release_ns());
  r.p90_us = us(release.p90_ns().value_or(0));
  r.measured = release.measured();
  r.probes = release.probes();
  r.rejected = release.rejected();
  r.lost = release.lost();
  r.note = note;
  return r;
}

nlohmann::json stats_json(const std::map<uint16_t, DelayLine>& lines,
                          const std::map<uint16_t, KernelQueueStats>& kernel,
                          const ProcessStats& process,
                          const std::map<uint16_t, QueueMarks>& marks) {
  nlohmann::json queues = nlohmann::json::array();
  uint64_t packets = 0, bytes = 0;
  for (const auto& [num, line] : lines) {
    const LineCounters& c = line.counters();
    packets += c.packets;
    bytes += c.bytes;
    auto k = kernel.find(num);
    bool known = k != kernel.end();
    queues.push_back({
        {"num", num},
        {"delay_us", static_cast<double>(line.spec().delay.ns) / 1e3},
        {"jitter_us", static_cast<double>(line.spec().jitter.ns) / 1e3},
        {"maxlen", line.spec().maxlen},
        {"packets", c.packets},
        {"bytes", c.bytes},
        {"held", line.held()},
        {"held_max", c.held_max},
        {"late_mean_us",
         c.released ? static_cast<double>(c.late_ns_sum) / static_cast<double>(c.released) / 1e3
                    : 0.0},
        {"late_max_us", static_cast<double>(c.late_ns_max) / 1e3},
        {"drops_full", c.drops_full},
        {"flushed", c.flushed},
        {"kernel_total", known ? static_cast<int64_t>(k->second.total) : -1},
        {"kernel_dropped", known ? static_cast<int64_t>(k->second.dropped) : -1},
        {"kernel_user_dropped", known ? static_cast<int64_t>(k->second.user_dropped) : -1},
        {"overhead_us", line.calibrated() ? us(line.calibration().overhead_ns()) : 0.0},
        {"queue_latency_us", line.calibrated() ? us(line.calibration().queue_ns()) : 0.0},
        {"release_us", line.calibrated() ? us(line.calibration().release_ns()) : 0.0},
        {"stamped", line.calibration().stamped()},
    });
    if (auto m = marks.find(num); m != marks.end() && m->second.slot >= 0) {
      queues.back()["mark"] = m->second.slot;
      queues.back()["ect"] = m->second.ect;
      queues.back()["ce_marked"] = m->second.ce;
      queues.back()["not_ect"] = m->second.not_ect;
    }
  }
  double cpu_s = process.cpu_user_s + process.cpu_sys_s;
  return {
      {"pid", process.pid},
      {"uptime_s", process.uptime_s},
      {"cpu_user_s", process.cpu_user_s},
      {"cpu_sys_s", process.cpu_sys_s},
      {"packets", packets},
      {"bytes", bytes},
      {"cpu_us_per_packet", packets ? cpu_s * 1e6 / static_cast<double>(packets) : 0.0},
      {"reloads", process.reloads},
      {"generation", process.generation},
      {"reload_error", process.reload_error},
      {"scheduling", process.scheduling},
      {"calibrated", process.calibrated},
      {"timer",
       {{"advance_us", process.timer.advance_us},
        {"oversleep_p90_us", process.timer.oversleep_p90_us},
        {"spin_s", process.timer.spin_s},
        {"spins", process.timer.spins},
        {"spin_budget_spent", process.timer.budget_spent}}},
      {"release",
       {{"us", process.calibrated ? process.release.us : 0.0},
        {"p90_us", process.release.p90_us},
        {"source", process.release.measured ? "probe" : "constant"},
        {"method", process.release.measured
                       ? "median of the last 32 loopback probes: kernel receive stamp less the "
                         "start of the probe's verdict (stage/calibration.h)"
                       : "kReleaseCostNs, measured on the reference VM (stage/calibration.h)"},
        {"probes", process.release.probes},
        {"rejected", process.release.rejected},
        {"lost", process.release.lost},
        {"note", process.release.note}}},
      {"queues", queues},
  };
}

}  // namespace tb::stage
