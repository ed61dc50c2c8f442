#include "launch/bench_run.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/paths.h"
#include "core/shm_names.h"
#include "launch/across_hosts.h"
#include "launch/place.h"
#include "launch/rank_group.h"
#include "plan/plan.h"
#include "workload/gloo_impl.h"
#include "workload/job.h"
#include "workload/rank_main.h"

namespace tb::launch {
using tb::workload::combine_rows;
using tb::workload::gloo_supports;
using tb::workload::rank_row_from_json;
using tb::workload::rank_rows_path;
using tb::workload::RankRow;
using workload::BenchResult;
using workload::BenchRow;
using workload::BenchSpec;
using workload::Job;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kKillGraceMs = 1000;
constexpr int kAfterFailureGraceMs = 5000;  // beyond the ranks' own timeout

// Unique per run: the second, the collective and the pid, and from a process's second bench on
// its sequence number. Two benches of one process in one second (an exercise check measuring
// twice) had one run id, so one results directory and one rendezvous store: the second run's
// rank 1 read rank 0's port from the first run's file before rank 0 wrote its own, and was
// refused (bench-exercises, 2026-12-05, exercise 2 with four students).
std::string new_run_id(const BenchOptions& o) {
  static std::atomic<int> runs{0};
  const int n = ++runs;
  char ts[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", std::gmtime(&now));
  return std::string("bench-") + ts + "-" + std::string(collective::name(o.spec.coll)) + "-" +
         std::to_string(::getpid()) + (n > 1 ? "-" + std::to_string(n) : "");
}

// Reads the lines a rank appended since last time.
struct RowFeed {
  std::string path;
  std::streamoff offset = 0;
  std::vector<nlohmann::json> lines;  // all lines so far
  bool read_more() {
    std::ifstream in(path);
    if (!in) return false;
    in.seekg(offset);
    std::string line;
    bool any = false;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // a partial last line: read it next time
      offset = in.tellg();
      try {
        lines.push_back(nlohmann::json::parse(line));
        any = true;
      } catch (...) {
      }
    }
    return any;
  }
};

// Receiver-not-ready NAKs sent by these RDMA devices so far (rxe's per-port counter in sysfs:
// shared-mode RDMA devices are visible from every namespace); nullopt when one has none.
std::optional<uint64_t> rnr_naks_sent(const std::vector<std::string>& by_rank) {
  std::vector<std::string> devs;
  for (const auto& list : by_rank) {
    size_t at = 0;
    while (at <= list.size()) {  // "a,b" or "-"
      const size_t comma = std::min(list.find(',', at), list.size());
      const std::string d = list.substr(at, comma - at);
      if (!d.empty() && d != "-" && std::find(devs.begin(), devs.end(), d) == devs.end())
        devs.push_back(d);
      at = comma + 1;
    }
  }
  if (devs.empty()) return std::nullopt;
  uint64_t sum = 0;
  for (const auto& d : devs) {
    std::ifstream in("/sys/class/infiniband/" + d + "/ports/1/hw_counters/send_rnr_err");
    uint64_t v = 0;
    if (!(in >> v)) return std::nullopt;
    sum += v;
  }
  return sum;
}

}  // namespace

IdleWatch::IdleWatch(std::chrono::milliseconds limit, const std::string& board_path, int ranks)
    : limit_(limit), last_(Clock::now()) {
  if (!board_path.empty() && ranks > 0)
    if (auto b = collective::ProgressBoard::watch(board_path, ranks)) board_ = std::move(*b);
}

IdleWatch::~IdleWatch() = default;

void IdleWatch::reported(Clock::time_point now) {
  last_ = std::max(last_, now);
}

bool IdleWatch::expired(Clock::time_point now) {
  if (now - last_ <= limit_) return false;
  if (board_) {
    const auto moved = Clock::time_point(std::chrono::nanoseconds(board_->latest()));
    last_ = std::max(last_, moved);
  }
  return now - last_ > limit_;
}

std::string progress_board_path(const Job& job) {
  return job.store_dir + "/" + job.run_id + ".progress";
}

std::string results_root() {
  return paths::roots().results;
}

Result<SafeDir> open_results_dir(const std::string& dir) {
  const std::string root = results_root();
  auto top = SafeDir::open_root(root);
  if (!top) return std::unexpected(top.error());
  if (!dir.starts_with(root + "/")) return SafeDir::open_root(dir);  // not ours to split
  return top->sub(dir.substr(root.size() + 1));
}

Status check_options(const BenchOptions& o) {
  using workload::ImplKind;
  using workload::Transport;
  TB_TRY(validate(o.spec));
  TB_TRY(workload::validate(o.transport));
  TB_TRY(workload::check_rank_timeout_ms(o.timeout_ms));
  if (o.spec.root < 0)
    return bad_input("-r/--root: " + std::to_string(o.spec.root) + " is not a rank (0 or more)");
  if (o.impl == ImplKind::kGloo && o.transport.channels != 1)
    return bad_input(
        "--channels: Gloo 5b14351's tcp transport has one connection per pair; "
        "use --channels 1 with --impl gloo");
  if (o.transport.spread_ports && o.impl == ImplKind::kGloo)
    return bad_input(
        "--ports spread: binds native tcp's channels to NIC ports; Gloo's tcp transport has one "
        "unbound connection per pair; use --impl native or --ports route");
  if (o.transport.intra_server == workload::IntraServer::kShm && o.impl == ImplKind::kGloo)
    return bad_input(
        "--intra-server shm: Gloo's tcp transport has no shared-memory path; use --impl native "
        "(or --intra-server net)");
  if (o.tier != "auto" && o.tier != "frontend")
    return bad_input("--tier: '" + o.tier +
                     "' is not a bench tier; use auto (NVLink in a server, the rail across "
                     "servers, the WAN across regions) or frontend (the VPC instead of the rail)");
  if (o.tier == "frontend" && o.transport.kind == Transport::kRdma)
    return bad_input(
        "--tier frontend: RDMA runs on rail pairs only and the frontend uses none; use "
        "--transport tcp");
  if (o.transport.kind == Transport::kRdma && o.impl == ImplKind::kGloo)
    return bad_input(
        "--transport rdma: Gloo's ibverbs transport in Debian's snapshot sets hop limit 1 (IP "
        "TTL 1 on rxe), so it only works over bridged paths; the lab's rail is routed through "
        "the ToR: use --impl native");
  return {};
}

Result<Job> prepare_job(const lab::LabState& lab, const BenchOptions& o) {
  using workload::ImplKind;
  using workload::Transport;
  TB_TRY(check_options(o));
  auto gpus = select_ranks(lab.topo, o.ranks);
  if (!gpus) return std::unexpected(gpus.error());
  Job job;
  job.lab = lab.lab;
  job.run_id = new_run_id(o);
  job.results_dir = results_root() + "/" + lab.lab + "/" + job.run_id;
  job.store_dir = job.results_dir + "/store";
  job.impl = o.impl;
  job.transport = o.transport;
  job.timeout_ms = o.timeout_ms;
  job.bench = o.spec;
  TB_TRY(place_ranks(job, lab.topo, *gpus, o.tier == "frontend"));
  mark_rdma_pairs(job, rxe_for_marks(lab));  // far hosts' devices assumed: across_hosts.h
  if (o.transport.spread_ports && bind_ports(job, lab.topo, *gpus) == 0)
    return bad_input("--ports spread: no pair of --ranks " + o.ranks + " in lab " + lab.lab +
                     " has two GPUs whose NICs have several rail ports on the same ToRs (a "
                     "dual-ToR region, GPUs on one rail); use --ports route");
  if (o.transport.kind == Transport::kRdma) {
    const auto pairs = count_rdma_pairs(job);
    if (pairs.rail == 0)
      return bad_input("--transport rdma: no pair of --ranks " + o.ranks +
                       " crosses the rail (RDMA runs on rail pairs only; nvl and wan pairs use "
                       "TCP); select ranks on two servers of a region, or use --transport tcp");
    if (pairs.rdma == 0) {
      std::string why = lab.rdma_why.empty() ? "rdma " + lab.rdma : lab.rdma_why;
      if (lab.rdma == "rxe" && !job.rdma_fallback.empty()) why = job.rdma_fallback.front();
      return bad_input("--transport rdma: lab " + lab.lab + " has no RDMA on its rail (" + why +
                       "); run `testbedctl doctor` to see why, or use --transport tcp");
    }
  }
  const int n = static_cast<int>(job.ranks.size());
  if (collective::rooted(o.spec.coll) && (o.spec.root < 0 || o.spec.root >= n))
    return bad_input("-r/--root: " + std::to_string(o.spec.root) + " is not a rank (0.." +
                     std::to_string(n - 1) + ")");
  if (o.spec.algo && o.impl == ImplKind::kGloo) TB_TRY(gloo_supports(o.spec.coll, *o.spec.algo));
  if (o.spec.algo && o.impl == ImplKind::kNative) {
    const auto& algos = collective::native_algos(o.spec.coll);
    if (std::find(algos.begin(), algos.end(), *o.spec.algo) == algos.end()) {
      std::string have;
      for (auto a : algos) have += (have.empty() ? "" : ", ") + std::string(collective::name(a));
      return bad_input("--algo: no " + std::string(collective::name(*o.spec.algo)) + " for " +
                       std::string(collective::name(o.spec.coll)) + "; native has " + have);
    }
  }
  if (o.spec.coll == collective::Coll::kAllReduce && o.spec.algo == collective::Algo::kHier) {
    std::map<int, int> per_server;
    for (const auto& r : job.ranks) ++per_server[r.server];
    for (const auto& [server, count] : per_server)
      if (count != per_server.begin()->second)
        return bad_input("--algo hier needs the same number of ranks on every server; --ranks " +
                         o.ranks + " gives " + std::to_string(per_server.begin()->second) +
                         " on one and " + std::to_string(count) +
                         " on another (select whole servers)");
  }
  return job;
}

Result<launch::RankGroup> start_ranks(const Job& job, const std::string& tb_rank,
                                      const std::vector<char>& local) {
  auto dir = open_results_dir(job.results_dir);
  if (!dir) return std::unexpected(with_context(dir.error(), "create results directory"));
  if (auto logs = dir->sub("logs"); !logs)
    return std::unexpected(with_context(logs.error(), "create results directory"));
  if (auto store = open_results_dir(job.store_dir); !store)
    return std::unexpected(with_context(store.error(), "create rendezvous store"));
  TB_TRY(dir->write("job.json", to_json(job).dump(1) + "\n"));
  const std::string job_path = job.results_dir + "/job.json";
  std::vector<launch::RankProc> procs;
  for (size_t r = 0; r < job.ranks.size(); ++r)
    procs.push_back({job.ranks[r].netns,
                     {tb_rank, "--job", job_path, "--rank", std::to_string(r)},
                     job.results_dir + "/logs/rank" + std::to_string(r) + ".log",
                     !local.empty() && !local[r]});
  return launch::RankGroup::start(procs, plan::owner_marker(job.lab));
}

Result<BenchResult> run_job(const Job& job, const lab::LabState& lab, const BenchOptions& o,
                            const std::function<void(const BenchResult&)>& on_start,
                            const std::function<void(const BenchResult&, const BenchRow&)>& on_row,
                            const std::atomic<bool>& stop) {
  const int n = static_cast<int>(job.ranks.size());
  std::vector<RowFeed> feeds;
  for (int r = 0; r < n; ++r) feeds.push_back({rank_rows_path(job.results_dir, r)});
  BenchResult res;
  res.lab = job.lab;
  res.run_id = job.run_id;
  res.results_dir = job.results_dir;
  res.impl = workload::to_string(job.impl);
  res.shaping = lab.shaping;
  res.lab_rdma = lab.rdma;
  res.lab_rdma_why = lab.rdma_why;
  res.transport = workload::to_string(job.transport.kind);
  res.intra_server = std::string(workload::name(job.transport.intra_server));
  if (job.impl == workload::ImplKind::kNative && job.transport.kind == workload::Transport::kRdma) {
    res.rdma_devices.assign(job.ranks.size(), "");
    res.qps = job.transport.qps;
    res.ib_timeout = job.transport.ib_timeout;
    res.ib_retry_cnt = job.transport.ib_retry_cnt;
    const auto pairs = count_rdma_pairs(job);
    res.rdma_pairs = pairs.rdma;
    res.rail_pairs = pairs.rail;
    res.rdma_fallback = job.rdma_fallback;
  }
  res.spec = job.bench;
  for (const auto& r : job.ranks) res.nodes.push_back(r.node);

  auto hosts = job_hosts(lab, job, RdmaAcross::kBench);
  if (!hosts) return std::unexpected(hosts.error());
  std::optional<multihost::CoordinatorRelay> relay;
  if (hosts->coordinates()) {
    auto r = open_relay(job, *hosts, "bench", lab.digest, o.rendezvous_port, stop);
    if (!r) return std::unexpected(r.error());
    relay.emplace(std::move(*r));
    res.hosts = hosts->summary();
  }
  auto group = start_ranks(job, o.tb_rank, hosts->local);
  if (!group) {
    if (relay) {
      relay->kill(kKillGraceMs);
      relay->done({false, 1, job.results_dir});
    }
    return std::unexpected(group.error());
  }

  const auto points = sweep(job.bench, n);
  std::vector<bool> ready(static_cast<size_t>(n), false);
  bool started = false;
  size_t next_row = 0;
  std::optional<Clock::time_point> kill_at;
  std::optional<uint64_t> rnr_before;
  // Emits every size that all ranks have finished.
  auto emit_rows = [&] {
    while (started && next_row < points.size()) {
      std::vector<RankRow> rows;
      for (auto& f : feeds) {
        size_t k = 0;
        for (const auto& l : f.lines)
          if (l.contains("bytes") && k++ == next_row) rows.push_back(rank_row_from_json(l));
      }
      if (static_cast<int>(rows.size()) < n) break;
      res.rows.push_back(combine_rows(job.bench.coll, n, rows));
      if (on_row) on_row(res, res.rows.back());
      ++next_row;
    }
  };
  IdleWatch idle(std::chrono::milliseconds(std::max(2 * job.timeout_ms, 120000)),
                 progress_board_path(job), n);
  for (;;) {
    bool activity = group->poll();
    if (relay) activity = pump(*relay, *group) || activity;
    for (int r = 0; r < n; ++r) {
      auto& f = feeds[static_cast<size_t>(r)];
      const size_t before = f.lines.size();
      if (!f.read_more()) continue;
      activity = true;
      for (size_t i = before; i < f.lines.size(); ++i) {
        const auto& l = f.lines[i];
        if (l.contains("ready")) {
          ready[static_cast<size_t>(r)] = true;
          if (res.describe.empty()) {
            res.describe = l.value("describe", "");
            res.algo_label = l.value("algo", "");
          }
          if (l.contains("rdma_devices") && static_cast<size_t>(r) < res.rdma_devices.size()) {
            std::string devs;
            for (const auto& d : l["rdma_devices"])
              devs += (devs.empty() ? "" : ",") + d.get<std::string>();
            res.rdma_devices[static_cast<size_t>(r)] = devs.empty() ? "-" : devs;
          }
        }
      }
    }
    if (!started && std::all_of(ready.begin(), ready.end(), [](bool b) { return b; })) {
      started = true;
      if (!res.rdma_devices.empty()) rnr_before = rnr_naks_sent(res.rdma_devices);
      if (on_start) on_start(res);
    }
    emit_rows();
    if (activity) idle.reported();
    const bool any_failed =
        std::any_of(group->ranks().begin(), group->ranks().end(),
                    [](const launch::RankExit& e) { return !e.running && e.code != 0; });
    if (any_failed && !kill_at)
      kill_at = Clock::now() + std::chrono::milliseconds(job.timeout_ms + kAfterFailureGraceMs);
    if (group->all_exited()) break;
    if (stop.load()) {
      if (relay) relay->kill(kKillGraceMs);
      group->kill_all(kKillGraceMs);
      res.errors.push_back("interrupted: ranks killed");
      break;
    }
    if (kill_at && Clock::now() >= *kill_at) {
      if (relay) relay->kill(kKillGraceMs);
      group->kill_all(kKillGraceMs);
      res.errors.push_back("ranks still running " +
                           std::to_string(job.timeout_ms + kAfterFailureGraceMs) +
                           " ms after a rank failed (beyond their own timeout): killed");
      break;
    }
    if (idle.expired()) {
      if (relay) relay->kill(kKillGraceMs);
      group->kill_all(kKillGraceMs);
      res.errors.push_back("no rank reported anything or moved a byte for " +
                           std::to_string(idle.limit().count() / 1000) + " s: killed");
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (relay) {
    // The other hosts' last rows, logs and exits (they kill their ranks when told).
    finish(*relay, *group, *hosts, std::chrono::milliseconds(kKillGraceMs + 15000));
    for (const auto& e : relay->errors()) res.errors.push_back(e);
  }
  for (auto& f : feeds) f.read_more();
  emit_rows();  // the sizes the last rows completed (another host's may come after the exits)
  if (rnr_before)
    if (auto after = rnr_naks_sent(res.rdma_devices); after && *after >= *rnr_before)
      res.rnr_naks = *after - *rnr_before;
  // The ranks unlink their shared-memory segments once both sides hold them; a rank that died
  // during set-up leaves its file, removed here (by the job's name prefix, core/shm_names.h).
  if (job.transport.intra_server == workload::IntraServer::kShm)
    if (auto left = remove_shm_files(shm_job_prefix(job.lab, job.run_id)); !left)
      res.errors.push_back("remove shared-memory segments: " + left.error().message);
  for (int r = 0; r < n; ++r) {
    const auto& e = group->ranks()[static_cast<size_t>(r)];
    if (e.code == 0) continue;
    std::string msg =
        "rank " + std::to_string(r) + " (" + job.ranks[static_cast<size_t>(r)].node + "): " + e.how;
    for (const auto& l : feeds[static_cast<size_t>(r)].lines)
      if (l.contains("error")) msg += ": " + l["error"].get<std::string>();
    res.errors.push_back(msg);
  }
  res.complete = res.rows.size() == points.size();
  if (relay) relay->done({res.ok(), res.ok() ? 0 : 1, job.results_dir});
  return res;
}

}  // namespace tb::launch
