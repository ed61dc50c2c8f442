// Probes for `run`: for each fault, one GPU-to-GPU path that crosses it (a GPU at the faulted
// link's end to a GPU on another server; across a WAN link, partition or router crash, a GPU
// in each region), with a `tb-probe serve` at the far end and a `tb-probe rtt --samples` at the
// near one sending every interval for the whole run. A path is probed once, however many
// faults it serves. The outages are runs of lost probes (probe/rtt.h). A pair with a DSCP marks
// its probes and their echoes with it (run's gold probe, scenario_run.h). Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fault/fault.h"
#include "lab/state.h"
#include "metrics/recovery.h"
#include "probe/rtt.h"

namespace tb::experiment {

struct ProbePair {
  std::string src, dst;  // GPU nodes
  std::string dst_addr;  // the address src reaches dst at (the hosts-file rule)
  std::vector<size_t> faults;
  uint16_t port = 0;
  int dscp = 0;  // IP_TOS = dscp << 2 on the probes and the echoes; 0 = unmarked
};

std::vector<ProbePair> probe_pairs(const lab::LabState& st,
                                   const std::vector<fault::Resolved>& faults);

class ProbeSet {
 public:
  // `name` tells the logs apart: logs/<name>-<i>.json and logs/<name>-serve-<i>.log. A probe
  // unanswered after `wait_ms` once the last is sent is lost. On a lab over several hosts
  // (lab state's host) only the servers whose node is on this host, then only the clients.
  Status start(const lab::LabState& st, std::vector<ProbePair>& pairs, const std::string& dir,
               const std::string& tb_probe, int interval_us, int64_t length_ns,
               const std::string& name = "probe", int wait_ms = 500);
  // Only the servers here (start_clients after: a lab over several hosts, where every host's
  // servers must listen before any host's clients send).
  Status start_servers(const lab::LabState& st, std::vector<ProbePair>& pairs,
                       const std::string& dir, const std::string& tb_probe, int64_t length_ns,
                       const std::string& name = "probe");
  Status start_clients(const lab::LabState& st, std::vector<ProbePair>& pairs,
                       const std::string& dir, const std::string& tb_probe, int interval_us,
                       int64_t length_ns, const std::string& name = "probe", int wait_ms = 500);
  // Whether pair i's client ran on this host.
  bool client_here(size_t i) const { return i < client_logs_.size() && !client_logs_[i].empty(); }
  const std::string& client_log(size_t i) const { return client_logs_[i]; }
  // Waits for the clients (bounded), stops the servers; outages per pair, in pair order (none
  // for a pair whose client is on another host).
  // `now`: the run was cut short (a host lost): the clients are ended at once instead of being
  // given until the planned end.
  std::vector<std::vector<metrics::Interval>> finish(std::vector<std::string>* errors,
                                                     bool now = false);
  // Each pair's whole result (sent, lost, round trips) once finished; nullopt where its client
  // printed none.
  const std::vector<std::optional<probe::RttResult>>& results() const { return results_; }
  ~ProbeSet();

 private:
  std::vector<int> servers_, clients_;
  std::vector<std::string> client_logs_;
  std::vector<std::optional<probe::RttResult>> results_;
  int64_t deadline_ns_ = 0;
};

// The result line of a `tb-probe rtt --samples` log (its last), nullopt when there is none.
std::optional<probe::RttResult> parse_rtt_log(const std::string& text);

}  // namespace tb::experiment
