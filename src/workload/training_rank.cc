#include "workload/training_rank.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "collective/rdma/rdma.h"
#include "collective/tcp/tcp.h"

namespace tb::workload {
namespace {

// A communicator over `group` (global ranks, ascending) for `rank`, keys under `name`.
Result<std::unique_ptr<collective::Comm>> group_comm(const Job& job, int rank,
                                                     const std::vector<int>& group,
                                                     const std::string& name) {
  const auto me = std::find(group.begin(), group.end(), rank) - group.begin();
  const auto& row = job.peers[static_cast<size_t>(rank)];
  std::vector<collective::TcpPeer> peers;
  std::vector<char> rdma;
  std::vector<int> node_of;
  for (int g : group) {
    peers.push_back(row[static_cast<size_t>(g)]);
    rdma.push_back(job.rdma.empty() ? 0
                                    : job.rdma[static_cast<size_t>(rank)][static_cast<size_t>(g)]);
    node_of.push_back(job.ranks[static_cast<size_t>(g)].server);
  }
  const std::string prefix = job.run_id + "." + name + std::to_string(group.front()) + "-" +
                             std::to_string(group.back()) + ".";
  const collective::FileStore store(job.store_dir);
  if (job.transport.kind == Transport::kRdma) {
    collective::RdmaOptions o;
    o.rank = static_cast<int>(me);
    o.size = static_cast<int>(group.size());
    o.qps = job.transport.qps;
    o.channels = job.transport.channels;
    o.peers = std::move(peers);
    o.rdma = std::move(rdma);
    o.timeout = std::chrono::milliseconds(job.timeout_ms);
    o.key_prefix = prefix;
    o.ib_timeout = job.transport.ib_timeout;
    o.ib_retry_cnt = job.transport.ib_retry_cnt;
    auto c = collective::RdmaComm::connect(store, o);
    if (!c) return std::unexpected(c.error());
    (*c)->set_node_of(std::move(node_of));
    return std::unique_ptr<collective::Comm>(std::move(*c));
  }
  collective::TcpOptions o;
  o.rank = static_cast<int>(me);
  o.size = static_cast<int>(group.size());
  o.channels = job.transport.channels;
  o.peers = std::move(peers);
  o.timeout = std::chrono::milliseconds(job.timeout_ms);
  o.key_prefix = prefix;
  auto c = collective::TcpComm::connect(store, o);
  if (!c) return std::unexpected(c.error());
  (*c)->set_node_of(std::move(node_of));
  return std::unique_ptr<collective::Comm>(std::move(*c));
}

}  // namespace

std::string group_tier(const Job& job, int rank, const std::vector<int>& group) {
  // The ring's successor: the peer this rank's AllReduce sends to.
  const auto me = std::find(group.begin(), group.end(), rank) - group.begin();
  const int next = group[static_cast<size_t>(me + 1) % group.size()];
  if (next == rank) return "";
  return job.peers[static_cast<size_t>(rank)][static_cast<size_t>(next)].tier;
}

Status run_training_job(const Job& job, int rank,
                        const std::function<void(const nlohmann::json&)>& put) {
  TrainingSpec spec = *job.training;
  if (job.steady) spec.steps = kTrainStepsRange.hi;  // until the stop file
  std::vector<int> server_of;
  for (const auto& r : job.ranks) server_of.push_back(r.server);
  auto pos = train_position(spec, static_cast<int>(job.ranks.size()), rank, server_of);
  if (!pos) return std::unexpected(pos.error());
  const auto& p = *pos;
  // Every rank makes its groups in the same order (tensor, data, then the pipeline pairs from
  // the lower stage up), so no two ranks wait on each other's second group.
  std::unique_ptr<collective::Comm> tp, dp, prev, next;
  TrainComms c;
  if (p.tp > 1) {
    const auto g = tp_group(p);
    auto comm = group_comm(job, rank, g, "tp");
    if (!comm) return std::unexpected(comm.error());
    tp = std::move(*comm);
    c.tp_tier = group_tier(job, rank, g);
  }
  if (p.dp > 1) {
    const auto g = dp_group(p);
    auto comm = group_comm(job, rank, g, "dp");
    if (!comm) return std::unexpected(comm.error());
    dp = std::move(*comm);
    c.dp_tier = group_tier(job, rank, g);
  }
  if (p.s > 0) {
    const std::vector<int> g = {p.rank(p.t, p.d, p.s - 1), rank};
    auto comm = group_comm(job, rank, g, "pp");
    if (!comm) return std::unexpected(comm.error());
    prev = std::move(*comm);
    c.pp_tier = group_tier(job, rank, g);
  }
  if (p.s + 1 < p.pp) {
    const std::vector<int> g = {rank, p.rank(p.t, p.d, p.s + 1)};
    auto comm = group_comm(job, rank, g, "pp");
    if (!comm) return std::unexpected(comm.error());
    next = std::move(*comm);
    c.pp_tier = group_tier(job, rank, g);
  }
  c.tp = tp.get();
  c.dp = dp.get();
  c.pp_prev = prev.get();
  c.pp_next = next.get();
  put(nlohmann::json{{"train_layout",
                      {{"tp", p.tp},
                       {"pp", p.pp},
                       {"dp", p.dp},
                       {"t", p.t},
                       {"s", p.s},
                       {"d", p.d},
                       {"tp_tier", tp ? c.tp_tier : ""},
                       {"dp_tier", dp ? c.dp_tier : ""},
                       {"pp_tier", prev || next ? c.pp_tier : ""}}}});
  uint64_t wrong = 0;
  auto on_step = [&](const StepRow& r) {
    put(nlohmann::json{{"train_step", to_json(r)}});
    wrong += r.wrong;
    if (job.steady)
      put(nlohmann::json{{"iter", job.start_iter + r.step}, {"s", r.start_ns}, {"e", r.end_ns}});
  };
  // run's stop file: K, the first step no rank starts (read as run_steady reads it).
  auto stop = [&](int64_t step) {
    if (!job.steady) return false;
    std::ifstream in(stop_path(job));
    int64_t k = -1;
    if (in) in >> k;
    return in && k >= 0 && job.start_iter + step >= k;
  };
  auto st = run_training(spec, p, c, on_step, stop);
  if (job.steady) put(nlohmann::json{{"wrong", wrong}});
  return st;
}

}  // namespace tb::workload
