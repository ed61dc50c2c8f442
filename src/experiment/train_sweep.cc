#include "experiment/train_sweep.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "lab/daemons.h"
#include "lab/watch.h"
#include "launch/bench_run.h"
#include "launch/place.h"
#include "launch/rank_group.h"
#include "workload/rank_main.h"

namespace tb::experiment {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kKillGraceMs = 1000;
constexpr int kAfterFailureGraceMs = 5000;
// The links' counters and queues are read this often during a row (lab::Watcher: one netlink
// dump per namespace), for the ECMP shares and the guard's link check.
constexpr auto kLinkSampleInterval = std::chrono::milliseconds(500);

// The selected GPUs grouped by server, in topology order.
Result<std::vector<std::vector<const plan::Node*>>> servers_of(const lab::LabState& lab,
                                                               const std::string& ranks) {
  auto gpus = launch::select_ranks(lab.topo, ranks);
  if (!gpus) return std::unexpected(gpus.error());
  std::vector<std::vector<const plan::Node*>> out;
  std::pair<std::string, int> last{"", -1};
  for (const auto* g : *gpus) {
    const std::pair<std::string, int> key{g->region, g->server};
    if (out.empty() || key != last) out.emplace_back();
    out.back().push_back(g);
    last = key;
  }
  return out;
}

std::vector<int> sweep_of(const TrainOptions& o, int available) {
  return o.servers.empty() ? std::vector<int>{available} : o.servers;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string run_id(int servers) {
  char ts[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", std::gmtime(&now));
  return std::string("train-") + ts + "-" + std::to_string(servers) + "s-" +
         std::to_string(::getpid());
}

// Every link's bytes over a row's window: the lab's interface counters read when the window
// opens and at each later sample (lab::Watcher), summed per link in topology order.
class LinkWindow {
 public:
  void open(const std::string& lab) {
    auto w = lab::Watcher::open(lab);
    if (!w) {
      error_ = w.error().message;
      return;
    }
    watcher_.emplace(std::move(*w));
    const auto& links = watcher_->state().topo.links;
    bytes_.assign(links.size(), {});
    for (size_t i = 0; i < links.size(); ++i) {
      bytes_[i].a = links[i].a.node + ":" + links[i].a.ifname;
      bytes_[i].b = links[i].b.node + ":" + links[i].b.ifname;
      bytes_[i].tier = plan::to_string(links[i].tier);
      bytes_[i].emulated_bps = links[i].emulated.rate.bps;
    }
    sample();
  }
  void sample() {
    if (!watcher_ || !error_.empty()) return;
    auto f = watcher_->sample();
    if (!f) {
      error_ = f.error().message;
      return;
    }
    const bool first = prev_.empty();
    if (first) prev_.resize(bytes_.size());
    for (const auto& l : f->links) {
      if (l.link >= bytes_.size()) continue;
      auto& b = bytes_[l.link];
      b.ab += static_cast<uint64_t>(l.ab_bps * f->interval_s / 8 + 0.5);
      b.ba += static_cast<uint64_t>(l.ba_bps * f->interval_s / 8 + 0.5);
      auto& p = prev_[l.link];
      if (!first) {
        const bool faulted = !l.up || l.changed || !l.seen || p.faulted;
        intervals_.push_back({b.a + " -> " + b.b, l.emulated_bps, l.ab_bps, f->interval_s, p.ab,
                              l.backlog_ab, faulted});
        intervals_.push_back({b.b + " -> " + b.a, l.emulated_bps, l.ba_bps, f->interval_s, p.ba,
                              l.backlog_ba, faulted});
      }
      p = {l.backlog_ab, l.backlog_ba, !l.up || l.changed || !l.seen};
    }
  }
  const std::vector<verify::LinkInterval>& intervals() const { return intervals_; }
  bool opened() const { return watcher_.has_value() || !error_.empty(); }
  const std::string& error() const { return error_; }
  std::vector<LinkBytes> bytes() const {
    return error_.empty() ? bytes_ : std::vector<LinkBytes>{};
  }

 private:
  struct Prev {
    uint64_t ab = 0, ba = 0;  // backlogs at the last sample
    bool faulted = false;
  };
  std::optional<lab::Watcher> watcher_;
  std::vector<LinkBytes> bytes_;
  std::vector<Prev> prev_;
  std::vector<verify::LinkInterval> intervals_;
  std::string error_;
};

std::string node_of(const std::string& end) {
  return end.substr(0, end.rfind(':'));
}

}  // namespace

std::vector<EcmpGroup> ecmp_groups(const std::vector<LinkBytes>& links) {
  std::vector<EcmpGroup> out;
  std::map<std::string, size_t> index;
  for (const auto& l : links) {
    if (l.tier != plan::to_string(plan::Tier::kAggregation)) continue;
    const std::string node = node_of(l.a);
    auto [it, fresh] = index.try_emplace(node, out.size());
    if (fresh) out.push_back(EcmpGroup{node, {}, {}, 0, 0, 0});
    auto& g = out[it->second];
    g.links.push_back(l.a);
    g.bytes.push_back(l.ab);
    g.total += l.ab;
  }
  std::erase_if(out, [](const EcmpGroup& g) { return g.links.size() < 2; });
  for (auto& g : out) {
    if (g.total == 0) continue;
    for (uint64_t b : g.bytes) {
      const double share = static_cast<double>(b) / static_cast<double>(g.total);
      g.max_share = std::max(g.max_share, share);
      if (share >= kEcmpCarrying) ++g.carrying;
    }
  }
  return out;
}

bool TrainResult::ok() const {
  if (!errors.empty() || rows.empty()) return false;
  return std::all_of(rows.begin(), rows.end(), [](const TrainRow& r) { return r.ok(); });
}

Status check_train(const lab::LabState& lab, const TrainOptions& o) {
  TB_TRY(workload::validate(o.spec));
  TB_TRY(workload::validate(o.transport));
  TB_TRY(workload::check_rank_timeout_ms(o.timeout_ms));
  auto servers = servers_of(lab, o.ranks);
  if (!servers) return std::unexpected(servers.error());
  const int available = static_cast<int>(servers->size());
  // A lab over several hosts: train starts every rank here (not across hosts yet), so every GPU
  // the sweep uses must be on this host.
  if (!lab.host.empty()) {
    const auto sweep = sweep_of(o, available);
    const int most =
        sweep.empty() ? 0 : std::min(available, *std::max_element(sweep.begin(), sweep.end()));
    for (int k = 0; k < most; ++k)
      for (const plan::Node* g : (*servers)[static_cast<size_t>(k)])
        if (g->host != lab.host)
          return bad_input("train: " + g->name + " is on host " + g->host + ", not on this one (" +
                           lab.host + "); train does not run across hosts yet: choose --ranks " +
                           "and --servers among this host's servers, or run it on " + g->host);
  }
  for (int n : sweep_of(o, available)) {
    if (n < 1 || n > available)
      return bad_input("--servers: " + std::to_string(n) + " is not 1.." +
                       std::to_string(available) + " (the servers --ranks " + o.ranks +
                       " selects in lab " + lab.lab + ")");
    std::vector<int> server_of;
    for (int k = 0; k < n; ++k)
      for (size_t g = 0; g < (*servers)[static_cast<size_t>(k)].size(); ++g) server_of.push_back(k);
    auto p = workload::train_position(o.spec, static_cast<int>(server_of.size()), 0, server_of);
    if (!p) return bad_input("--servers " + std::to_string(n) + ": " + p.error().message);
  }
  return {};
}

TrainOptions train_options(const scenario::Scenario& s, const scenario::Workload& w) {
  TrainOptions o;
  const auto& m = w.training;
  o.ranks = w.ranks;
  o.servers = m.servers;
  o.spec.params = m.params;
  o.spec.grad_bytes = m.grad_bytes;
  o.spec.activation_bytes = m.activation_bytes;
  o.spec.layers = m.layers;
  o.spec.micro_batches = m.micro_batches;
  o.spec.samples = m.samples;
  o.spec.tp = m.tp;
  o.spec.pp = m.pp;
  o.spec.bucket_bytes = m.bucket_bytes;
  o.spec.steps = m.steps;
  o.spec.warmup = w.warmup;
  o.compute_real_ns = m.compute.ns;
  o.compute_scale = s.scale.compute;
  o.spec.compute_ns = static_cast<int64_t>(static_cast<double>(m.compute.ns) * s.scale.compute);
  o.transport.channels = w.channels;
  o.frontend = w.tier == "frontend";
  return o;
}

TrainRow summarise_steps(const std::vector<std::vector<workload::StepRow>>& by_rank) {
  TrainRow row;
  size_t steps = by_rank.empty() ? 0 : by_rank.front().size();
  for (const auto& r : by_rank) steps = std::min(steps, r.size());
  row.steps = static_cast<int>(steps);
  std::vector<double> step, compute, exposed, tp, pp, dp;
  for (size_t k = 0; k < steps; ++k) {
    const workload::StepRow* slow = nullptr;
    for (const auto& r : by_rank)
      if (!slow || r[k].step_ns() > slow->step_ns()) slow = &r[k];
    step.push_back(static_cast<double>(slow->step_ns()) / 1e6);
    compute.push_back(static_cast<double>(slow->compute_ns) / 1e6);
    exposed.push_back(static_cast<double>(slow->exposed_ns()) / 1e6);
    tp.push_back(static_cast<double>(slow->tp_ns) / 1e6);
    pp.push_back(static_cast<double>(slow->pp_ns) / 1e6);
    dp.push_back(static_cast<double>(slow->dp_wait_ns) / 1e6);
  }
  row.step_ms = median(step);
  row.compute_ms = median(compute);
  row.exposed_ms = median(exposed);
  row.tp_ms = median(tp);
  row.pp_ms = median(pp);
  row.dp_wait_ms = median(dp);
  for (const auto& r : by_rank) {
    if (!r.empty())
      for (const auto& [tier, b] : r.front().bytes) row.bytes[tier] += b;
    for (const auto& s : r) row.wrong += s.wrong;
  }
  return row;
}

void fill_efficiency(TrainResult& r) {
  const TrainRow* base = nullptr;
  for (const auto& row : r.rows)
    if (row.ok() && (!base || row.servers < base->servers)) base = &row;
  r.base_servers = base ? base->servers : 0;
  for (auto& row : r.rows)
    row.efficiency = base && row.ok()
                         ? workload::scaling_efficiency(row.samples_per_s * base->servers,
                                                        row.servers, base->samples_per_s)
                         : 0;
}

Result<workload::Job> training_run_job(const scenario::Scenario& s, const scenario::Workload& w,
                                       const lab::LabState& st,
                                       const workload::TransportOptions& transport, int timeout_ms,
                                       const std::string& id, const std::string& results_dir) {
  auto o = train_options(s, w);
  o.transport.kind = transport.kind;
  o.transport.qps = transport.qps;
  o.transport.ib_timeout = transport.ib_timeout;
  o.transport.ib_retry_cnt = transport.ib_retry_cnt;
  o.timeout_ms = timeout_ms;
  o.servers.clear();  // every selected server
  TB_TRY(check_train(st, o));
  auto gpus = launch::select_ranks(st.topo, o.ranks);
  if (!gpus) return std::unexpected(gpus.error());
  workload::Job j;
  j.lab = st.lab;
  j.run_id = id;
  j.results_dir = results_dir + "/workload";
  j.store_dir = j.results_dir + "/store";
  j.timeout_ms = timeout_ms;
  j.transport = o.transport;
  j.training = o.spec;
  j.steady = true;
  TB_TRY(launch::place_ranks(j, st.topo, *gpus));
  if (o.frontend) TB_TRY(launch::route_over_frontend(j, *gpus));
  launch::mark_rdma_pairs(j, st.rxe);
  return j;
}

Result<TrainResult> run_train(const lab::LabState& lab, const TrainOptions& o,
                              const std::function<void(const TrainResult&)>& on_row,
                              const std::atomic<bool>& stop) {
  TB_TRY(check_train(lab, o));
  auto servers = servers_of(lab, o.ranks);
  if (!servers) return std::unexpected(servers.error());
  TrainResult res;
  res.lab = lab.lab;
  res.scenario = lab.scenario;
  res.shaping = lab.shaping;
  res.transport = workload::to_string(o.transport.kind);
  res.tier = o.frontend ? "frontend" : "rail";
  res.spec = o.spec;
  res.compute_real_ns = o.compute_real_ns;
  res.compute_scale = o.compute_scale;
  std::vector<std::string> stage_files;
  for (const auto& s : lab.stages) stage_files.push_back(lab::stage_stats_path(lab.lab, s.netns));

  for (int n : sweep_of(o, static_cast<int>(servers->size()))) {
    if (stop.load()) break;
    std::vector<const plan::Node*> gpus;
    for (int k = 0; k < n; ++k)
      gpus.insert(gpus.end(), (*servers)[static_cast<size_t>(k)].begin(),
                  (*servers)[static_cast<size_t>(k)].end());
    workload::Job job;
    job.lab = lab.lab;
    job.run_id = run_id(n);
    job.results_dir = launch::results_root() + "/" + lab.lab + "/" + job.run_id;
    job.store_dir = job.results_dir + "/store";
    job.transport = o.transport;
    job.timeout_ms = o.timeout_ms;
    job.training = o.spec;
    TB_TRY(launch::place_ranks(job, lab.topo, gpus));
    if (o.frontend) TB_TRY(launch::route_over_frontend(job, gpus));
    launch::mark_rdma_pairs(job, lab.rxe);
    const int nr = static_cast<int>(job.ranks.size());

    TrainRow row;
    // The guard's window opens once every rank has joined its groups (its "train_layout" line):
    // starting processes and connecting are not the steps' load.
    auto before = verify::sample_host(stage_files);
    auto cg_before = congestion::read_counters(lab::lab_dir(lab.lab));
    LinkWindow links;
    Clock::time_point last_link_sample;
    int joined = 0;
    bool window_open = false;
    auto group = launch::start_ranks(job, o.tb_rank);
    if (!group) return std::unexpected(group.error());
    std::vector<std::vector<workload::StepRow>> steps(static_cast<size_t>(nr));
    std::vector<std::string> errors(static_cast<size_t>(nr));
    std::vector<std::streamoff> offsets(static_cast<size_t>(nr), 0);
    // Reads what each rank appended since last time; true when anything was.
    auto read_more = [&]() {
      bool any = false;
      for (int r = 0; r < nr; ++r) {
        std::ifstream in(workload::rank_rows_path(job.results_dir, r));
        if (!in) continue;
        in.seekg(offsets[static_cast<size_t>(r)]);
        std::string line;
        while (std::getline(in, line)) {
          if (in.eof()) break;  // a partial last line: next time
          offsets[static_cast<size_t>(r)] = in.tellg();
          any = true;
          auto j = nlohmann::json::parse(line, nullptr, false);
          if (j.contains("train_layout")) ++joined;
          if (j.contains("train_step"))
            steps[static_cast<size_t>(r)].push_back(workload::step_row_from_json(j["train_step"]));
          if (j.contains("error")) errors[static_cast<size_t>(r)] = j["error"].get<std::string>();
        }
      }
      return any;
    };
    auto last_activity = Clock::now();
    std::optional<Clock::time_point> kill_at;
    const auto idle_limit = std::chrono::milliseconds(std::max(2 * o.timeout_ms, 120000));
    for (;;) {
      const bool activity = group->poll() | read_more();
      if (!window_open && joined == nr) {
        before = verify::sample_host(stage_files);
        cg_before = congestion::read_counters(lab::lab_dir(lab.lab));
        links.open(lab.lab);
        last_link_sample = Clock::now();
        window_open = true;
      } else if (window_open && Clock::now() - last_link_sample >= kLinkSampleInterval) {
        links.sample();
        last_link_sample = Clock::now();
      }
      if (activity) last_activity = Clock::now();
      const bool any_failed =
          std::any_of(group->ranks().begin(), group->ranks().end(),
                      [](const launch::RankExit& e) { return !e.running && e.code != 0; });
      if (any_failed && !kill_at)
        kill_at = Clock::now() + std::chrono::milliseconds(o.timeout_ms + kAfterFailureGraceMs);
      if (group->all_exited()) break;
      if (stop.load()) {
        group->kill_all(kKillGraceMs);
        row.errors.push_back("interrupted: ranks killed");
        break;
      }
      if (kill_at && Clock::now() >= *kill_at) {
        group->kill_all(kKillGraceMs);
        row.errors.push_back("ranks still running after a rank failed: killed");
        break;
      }
      if (Clock::now() - last_activity > idle_limit) {
        group->kill_all(kKillGraceMs);
        row.errors.push_back("no rank reported anything for " +
                             std::to_string(idle_limit.count() / 1000) + " s: killed");
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    read_more();
    auto host = verify::host_load(before, verify::sample_host(stage_files));
    const auto cg_window =
        congestion::delta(cg_before, congestion::read_counters(lab::lab_dir(lab.lab)));
    links.sample();
    if (links.opened() && links.error().empty()) verify::add_link_check(host, links.intervals());
    auto errs = std::move(row.errors);
    row = summarise_steps(steps);
    row.errors = std::move(errs);
    for (int r = 0; r < nr; ++r) {
      const auto& e = group->ranks()[static_cast<size_t>(r)];
      if (e.code == 0) continue;
      std::string msg = "rank " + std::to_string(r) + " (" +
                        job.ranks[static_cast<size_t>(r)].node + "): " + e.how;
      if (!errors[static_cast<size_t>(r)].empty()) msg += ": " + errors[static_cast<size_t>(r)];
      row.errors.push_back(msg);
    }
    if (row.steps < o.spec.steps && row.errors.empty())
      row.errors.push_back(std::to_string(row.steps) + " of " + std::to_string(o.spec.steps) +
                           " steps reported by every rank");
    std::vector<int> server_of;
    for (const auto& r : job.ranks) server_of.push_back(r.server);
    const auto p = *workload::train_position(o.spec, nr, 0, server_of);  // check_train'd
    row.servers = n;
    row.ranks = nr;
    row.tp = p.tp;
    row.pp = p.pp;
    row.dp = p.dp;
    row.run_id = job.run_id;
    row.results_dir = job.results_dir;
    row.host = host;
    row.links = links.bytes();
    row.link_error =
        links.opened() ? links.error() : "the window never opened (not every rank joined)";
    row.ecmp = ecmp_groups(row.links);
    row.congestion = cg_window;
    row.samples_per_s =
        workload::samples_per_second(workload::samples_per_step(o.spec, p.dp), row.step_ms / 1e3);
    res.rows.push_back(std::move(row));
    fill_efficiency(res);
    if (on_row) on_row(res);
  }
  return res;
}

}  // namespace tb::experiment
