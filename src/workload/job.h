// A bench job: everything the rank workers need, written by `testbedctl bench` as job.json in
// the run's results directory and read by every tb-rank. Building it is pure (topology in,
// job out), so rank selection and the per-pair addressing are unit-tested without root.
//
// Addressing (native): for every pair of ranks the plan's own rule (plan::reach, the rule the
// hosts files follow) gives the peer's address and this rank's source address on the same
// tier: NVLink inside a server, the rail fabric inside a region, the frontend/WAN across
// regions. Gloo binds one address per rank (its device): the rail address when every rank is
// in one region, else the NVLink/frontend address, which routes across regions.
//
// Transport (native; workload/transport.h): tcp for every pair, or rdma: the pairs
// mark_rdma_pairs marks (rail tier, an rxe device in both ranks' namespaces) over RDMA verbs
// (collective/rdma/rdma.h), the rest over TCP. In job.json the kinds are their names ("native",
// "rdma") and the transport's fields sit at the top level, as they always have.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "collective/tcp/tcp.h"
#include "core/error.h"
#include "workload/bench.h"
#include "workload/training.h"
#include "workload/transport.h"

namespace tb::workload {

struct RankPlace {
  std::string node;   // "hz/s0/g3"
  std::string netns;  // "tb-hzbj-hz-s0-g3"
  int server = 0;     // dense id of (region, server), for hierarchical algorithms
  std::string gloo_addr;
};

// The ranks' idle timeout as bench and run take it (--timeout, seconds; the job holds ms).
inline constexpr RealRange kRankTimeoutSeconds{0.1, 86400};
// "--timeout: must be 0.1..86400 seconds" unless `ms` is inside kRankTimeoutSeconds.
inline Status check_rank_timeout_ms(int ms) {
  if (kRankTimeoutSeconds.contains(ms / 1000.0)) return {};
  return bad_input("--timeout: must be " + kRankTimeoutSeconds.text() + " seconds");
}

struct Job {
  std::string lab, run_id;
  std::string results_dir;  // logs, per-rank rows (rank<R>.jsonl), bench.json
  std::string store_dir;    // rendezvous
  ImplKind impl = ImplKind::kNative;
  TransportOptions transport;  // native's transport and tunables; channels for both
  int timeout_ms = 30000;
  BenchSpec bench;
  bool steady = false;     // run's workload: run_steady until <results_dir>/stop says K
  int64_t start_iter = 0;  // steady: the first iteration's number (after a restart)
  // The training-step workload (workload/training.h) instead of the bench: each rank runs its
  // steps over one communicator per parallel group, made from the same peers.
  std::optional<TrainingSpec> training;
  std::vector<RankPlace> ranks;
  std::vector<std::vector<collective::TcpPeer>> peers;  // [rank][peer], native only
  std::vector<std::vector<char>> rdma;                  // [rank][peer]: 1 = over RDMA; empty = none
  std::vector<std::string> rdma_fallback;               // why some rail pairs stay on TCP (reports)
};

// Pairs over RDMA and rail pairs (each unordered pair once), for reports.
struct RdmaPairCount {
  int rdma = 0, rail = 0;
};
RdmaPairCount count_rdma_pairs(const Job& job);

nlohmann::json to_json(const Job& j);
Result<Job> job_from_json(const nlohmann::json& j);
Result<Job> load_job(const std::string& path);
std::string stop_path(const Job& j);

}  // namespace tb::workload
