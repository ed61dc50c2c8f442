// Probes for `run`: for each fault, one GPU-to-GPU path that crosses it (a GPU at the faulted
// link's end to a GPU on another server; across a WAN link, partition or router crash, a GPU
// in each region), with a `tb-probe serve` at the far end and a `tb-probe rtt --samples` at the
// near one sending every interval for the whole run. A path is probed once, however many
// faults it serves. The outages are runs of lost probes (probe/rtt.h). Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fault/fault.h"
#include "lab/state.h"
#include "metrics/recovery.h"

namespace tb::experiment {

struct ProbePair {
  std::string src, dst;  // GPU nodes
  std::string dst_addr;  // the address src reaches dst at (the hosts-file rule)
  std::vector<size_t> faults;
  uint16_t port = 0;
};

std::vector<ProbePair> probe_pairs(const lab::LabState& st,
                                   const std::vector<fault::Resolved>& faults);

class ProbeSet {
 public:
  Status start(const lab::LabState& st, std::vector<ProbePair>& pairs, const std::string& dir,
               const std::string& tb_probe, int interval_us, int64_t length_ns);
  // Waits for the clients (bounded), stops the servers; outages per pair, in pair order.
  std::vector<std::vector<metrics::Interval>> finish(std::vector<std::string>* errors);
  ~ProbeSet();

 private:
  std::vector<int> servers_, clients_;
  std::vector<std::string> client_logs_;
  int64_t deadline_ns_ = 0;
};

}  // namespace tb::experiment
