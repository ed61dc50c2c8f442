// Whether the host, rather than the emulation, explains a measurement (`verify --under-load`):
// the CPUs' busy share over the measuring window (/proc/stat) and how late the lab's delay
// stages released packets in that window (their stats files: late_mean_us x packets per queue,
// differenced), with each stage's scheduling. A stage that releases packets late, or CPUs with
// no idle time, add delay the scenario did not ask for: the emulation is not at fault.
// Pure except sample_host; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tb::verify {

// The host is blamed when its CPUs were this busy over the window ...
inline constexpr double kHostBusyShare = 0.90;
// ... or the stages released packets this late on average (the 20 us of the sub-ms target).
inline constexpr double kStageLateUs = 20;

struct HostSample {
  uint64_t cpu_busy = 0, cpu_total = 0;  // jiffies, all CPUs (/proc/stat "cpu" line)
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

struct HostLoad {
  double cpu_busy = -1;            // share of all CPUs' time, -1 unknown
  double stage_late_mean_us = -1;  // over the window, -1 when no packet was released
  uint64_t stage_packets = 0;
  double stage_late_max_us = 0;  // since the stages started
  std::vector<std::string> scheduling;
  bool host_bound = false;   // busy >= kHostBusyShare or late mean >= kStageLateUs
  std::string text() const;  // one line for people
};

HostLoad host_load(const HostSample& before, const HostSample& after);
nlohmann::json to_json(const HostLoad& h);

}  // namespace tb::verify
