#include "workload/rank_main.h"

#include <fcntl.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "collective/rdma/rdma.h"
#include "collective/shm/shm.h"
#include "collective/tcp/tcp.h"
#include "core/safe_file.h"
#include "core/shm_names.h"
#include "workload/gloo_impl.h"
#include "workload/job.h"
#include "workload/native_impl.h"
#include "workload/training_rank.h"

namespace tb::workload {
namespace {

// `devices` gets the RDMA devices the communicator uses (for the report).
Result<std::unique_ptr<Impl>> make_impl(const Job& job, int rank,
                                        std::vector<std::string>& devices) {
  const int n = static_cast<int>(job.ranks.size());
  if (job.impl == ImplKind::kGloo) {
    GlooOptions o;
    o.rank = rank;
    o.size = n;
    o.store_dir = job.store_dir;
    o.prefix = job.run_id;
    o.address = job.ranks[static_cast<size_t>(rank)].gloo_addr;
    o.timeout_ms = job.timeout_ms;
    return make_gloo_impl(o);
  }
  std::vector<int> node_of;
  for (const auto& r : job.ranks) node_of.push_back(r.server);
  const collective::FileStore store(job.store_dir);
  const std::string key_prefix = job.run_id + ".";
  // --intra-server shm: the pairs on this rank's server over shared memory, the rest below.
  const bool shm = job.transport.intra_server == IntraServer::kShm;
  std::vector<char> on_shm(static_cast<size_t>(n), 0);
  std::vector<char> on_net(static_cast<size_t>(n), 1);
  int shm_peers = 0, net_peers = 0;
  for (int j = 0; j < n; ++j) {
    if (j == rank) continue;
    const bool same = shm && node_of[static_cast<size_t>(j)] == node_of[static_cast<size_t>(rank)];
    on_shm[static_cast<size_t>(j)] = same ? 1 : 0;
    on_net[static_cast<size_t>(j)] = same ? 0 : 1;
    ++(same ? shm_peers : net_peers);
  }
  std::unique_ptr<collective::Comm> net;
  std::string description;
  if (job.transport.kind == Transport::kRdma) {
    collective::RdmaOptions o;
    o.rank = rank;
    o.size = n;
    o.qps = job.transport.qps;
    o.channels = job.transport.channels;
    o.peers = job.peers[static_cast<size_t>(rank)];
    o.rdma = job.rdma.empty() ? std::vector<char>(static_cast<size_t>(n), 0)
                              : job.rdma[static_cast<size_t>(rank)];
    if (shm) o.use = on_net;
    o.timeout = std::chrono::milliseconds(job.timeout_ms);
    o.key_prefix = key_prefix;
    o.ib_timeout = job.transport.ib_timeout;
    o.ib_retry_cnt = job.transport.ib_retry_cnt;
    auto comm = collective::RdmaComm::connect(store, o);
    if (!comm) return std::unexpected(comm.error());
    description = (*comm)->description().to_string();
    devices = (*comm)->description().devices;
    net = std::move(*comm);
  } else if (!shm || net_peers > 0) {
    collective::TcpOptions o;
    o.rank = rank;
    o.size = n;
    o.channels = job.transport.channels;
    o.peers = job.peers[static_cast<size_t>(rank)];
    o.timeout = std::chrono::milliseconds(job.timeout_ms);
    o.key_prefix = key_prefix;
    if (shm) o.use = on_net;
    auto comm = collective::TcpComm::connect(store, o);
    if (!comm) return std::unexpected(comm.error());
    const bool frontend = std::any_of(o.peers.begin(), o.peers.end(),
                                      [](const auto& p) { return p.tier == "frontend"; });
    description = "native tcp, " + std::to_string(job.transport.channels) +
                  " connection(s) per peer, bound per tier (" +
                  (frontend ? (shm ? std::string("frontend/wan, --tier frontend")
                                   : std::string("nvl/frontend/wan, --tier frontend"))
                   : shm    ? std::string("rail/wan")
                            : std::string("nvl/rail/wan")) +
                  ")";
    size_t ports = 0;
    for (const auto& p : o.peers) ports = std::max(ports, p.ports.size());
    if (ports > 0)
      description += ", rail channels bound to " + std::to_string(ports) +
                     " NIC ports in turn (--ports spread)";
    net = std::move(*comm);
  } else {
    description = "native, no pair off this rank's server";
  }
  if (!shm) {
    net->set_node_of(std::move(node_of));
    return make_native_impl(std::move(net), std::move(description));
  }
  collective::ShmOptions o;
  o.rank = rank;
  o.size = n;
  o.shm = on_shm;
  o.prefix = shm_job_prefix(job.lab, job.run_id);
  o.board_path = store.dir() + "/" + key_prefix + "progress";
  o.timeout = std::chrono::milliseconds(job.timeout_ms);
  auto comm = collective::ShmComm::connect(o, std::move(net));
  if (!comm) return std::unexpected(comm.error());
  (*comm)->set_node_of(std::move(node_of));
  description += "; intra-server pairs (" + std::to_string(shm_peers) +
                 " of this rank's peers) over shared memory (--intra-server shm, " +
                 std::to_string(collective::kShmRingBytes >> 10) +
                 " KiB ring per direction): they bypass the emulated NVLink link, its shaping "
                 "and faults";
  return make_native_impl(std::move(*comm), std::move(description));
}

}  // namespace

std::string rank_rows_path(const std::string& results_dir, int rank) {
  return results_dir + "/rank" + std::to_string(rank) + ".jsonl";
}

int rank_main(const std::string& job_path, int rank) {
  auto job = load_job(job_path);
  if (!job) {
    std::fprintf(stderr, "tb-rank: %s\n", job.error().message.c_str());
    return kExitBadInput;
  }
  if (rank < 0 || rank >= static_cast<int>(job->ranks.size())) {
    std::fprintf(stderr, "tb-rank: --rank %d is not in 0..%zu\n", rank, job->ranks.size() - 1);
    return kExitBadInput;
  }
  // Appended one line per write(2), so the orchestrator reading it sees whole lines; opened
  // without following a symlink (core/safe_file.h).
  auto rows = open_file(rank_rows_path(job->results_dir, rank), O_WRONLY | O_CREAT | O_APPEND);
  if (!rows) {
    std::fprintf(stderr, "tb-rank %d: %s\n", rank, rows.error().message.c_str());
    return rows.error().exit_code;
  }
  auto put = [&](const nlohmann::json& j) {
    (void)write_all(rows->get(), j.dump() + "\n", rank_rows_path(job->results_dir, rank));
  };
  auto report_error = [&](const Error& e) {
    std::fprintf(stderr, "tb-rank %d (%s): %s\n", rank,
                 job->ranks[static_cast<size_t>(rank)].node.c_str(), e.message.c_str());
    put(nlohmann::json{{"error", e.message}});
    return e.exit_code == kExitBadInput ? kExitBadInput : kExitFailed;
  };
  if (job->training) {
    // The training workload makes its own communicators, one per parallel group.
    std::fprintf(stderr, "tb-rank %d/%zu on %s: training, native %s\n", rank, job->ranks.size(),
                 job->ranks[static_cast<size_t>(rank)].node.c_str(),
                 std::string(to_string(job->transport.kind)).c_str());
    put(nlohmann::json{{"ready", true}, {"describe", "training"}});
    auto st = run_training_job(*job, rank, put);
    if (!st) return report_error(st.error());
    put(nlohmann::json{{"done", true}});
    return kExitOk;
  }
  std::vector<std::string> devices;
  auto impl = make_impl(*job, rank, devices);
  if (!impl) return report_error(impl.error());
  std::fprintf(stderr, "tb-rank %d/%zu on %s: %s\n", rank, job->ranks.size(),
               job->ranks[static_cast<size_t>(rank)].node.c_str(), (*impl)->describe().c_str());
  const auto algo = job->bench.algo.value_or((*impl)->default_algo(job->bench.coll));
  collective::Call label{job->bench.coll, algo, job->bench.type, job->bench.op, job->bench.root};
  nlohmann::json ready{
      {"ready", true}, {"algo", (*impl)->algo_label(label)}, {"describe", (*impl)->describe()}};
  if (job->impl == ImplKind::kNative && job->transport.kind == Transport::kRdma)
    ready["rdma_devices"] = devices;
  put(ready);
  if (job->steady) {
    uint64_t wrong = 0;
    auto st = run_steady(
        **impl, job->bench, stop_path(*job), job->start_iter,
        [&](int64_t i, int64_t s, int64_t e) {
          // Flushed each time: the orchestrator picks the stop iteration from these.
          put(nlohmann::json{{"iter", i}, {"s", s}, {"e", e}});
        },
        &wrong);
    put(nlohmann::json{{"wrong", wrong}});
    if (!st) return report_error(st.error());
    put(nlohmann::json{{"done", true}});
    return kExitOk;
  }
  auto st = run_bench(**impl, job->bench, [&](const RankRow& r) { put(to_json(r)); });
  if (!st) return report_error(st.error());
  put(nlohmann::json{{"done", true}});
  return kExitOk;
}

}  // namespace tb::workload
