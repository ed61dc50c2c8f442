#include "experiment/experiment.h"

#include <unistd.h>

#include <poll.h>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "apply/netlink_kernel.h"
#include "collective/rdma/rdma.h"
#include "core/events.h"
#include "experiment/probes.h"
#include "experiment/steady.h"
#include "fault/fault.h"
#include "fault/link_ops.h"
#include "fault/timeline.h"
#include "launch/bench_run.h"
#include "launch/place.h"
#include "launch/rank_group.h"
#include "netlink/route_monitor.h"
#include "plan/hosts.h"
#include "plan/plan.h"
#include "scenario/names.h"
#include "workload/job.h"
#include "workload/rank_main.h"

namespace tb::experiment {
namespace fs = std::filesystem;
namespace {

const scenario::Workload* pick_workload(const scenario::Scenario& s, const RunOptions& o) {
  if (o.workload == "none") return nullptr;
  for (const auto& w : s.workloads)
    if (w.kind == "collective" && (o.workload.empty() || w.name == o.workload)) return &w;
  return nullptr;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Watches routes in `netns_list` from a thread until stopped.
class Monitors {
 public:
  Status start(const std::vector<std::string>& netns_list) {
    for (const auto& ns : netns_list) {
      auto m = netlink::RouteMonitor::open(ns);
      if (!m) return std::unexpected(m.error());
      mons_.push_back(std::move(*m));
    }
    thread_ = std::thread([this] { loop(); });
    return {};
  }
  std::vector<std::pair<std::string, netlink::RouteChange>> stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return changes_;
  }
  ~Monitors() { stop(); }

 private:
  void loop() {
    std::vector<pollfd> pfds;
    for (auto& m : mons_) pfds.push_back({m.fd(), POLLIN, 0});
    while (!stop_) {
      if (::poll(pfds.data(), pfds.size(), 20) <= 0) continue;
      for (size_t i = 0; i < mons_.size(); ++i)
        if (pfds[i].revents & POLLIN)
          for (auto& c : mons_[i].drain()) changes_.emplace_back(mons_[i].netns(), c);
    }
  }
  std::vector<netlink::RouteMonitor> mons_;
  std::vector<std::pair<std::string, netlink::RouteChange>> changes_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::string run_id() {
  char ts[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", std::gmtime(&now));
  return std::string("run-") + ts + "-" + std::to_string(::getpid());
}

}  // namespace

bool RunResult::ok() const {
  if (!errors.empty()) return false;
  for (const auto& v : verdicts)
    if (!v.ok) return false;
  return true;
}

Status check_run(const scenario::Scenario& s, const lab::LabState& st, const RunOptions& o) {
  for (const auto& f : s.faults) {
    auto r = fault::resolve(st, f);
    if (!r)
      return std::unexpected(with_context(
          r.error(), s.file + ":" + std::to_string(f.loc.line) + ": [[fault]] " + f.kind));
  }
  if (!o.workload.empty() && o.workload != "none" && !pick_workload(s, o))
    return bad_input("--workload " + o.workload + ": no collective [[workload]] of that name in " +
                     s.file);
  if (o.transport != "tcp" && o.transport != "rdma")
    return bad_input("--transport: '" + o.transport + "' is not tcp or rdma");
  TB_TRY(collective::validate_rdma_tuning(o.qps, o.ib_timeout, o.ib_retry_cnt));
  if (const auto* w = pick_workload(s, o)) {
    auto gpus = launch::select_ranks(st.topo, w->ranks);
    if (!gpus) return std::unexpected(gpus.error());
    if (o.transport == "rdma") {
      workload::Job j;
      j.transport = "rdma";
      TB_TRY(launch::place_ranks(j, st.topo, *gpus));
      launch::mark_rdma_pairs(j, st.rxe);
      if (workload::count_rdma_pairs(j).rdma == 0)
        return bad_input("--transport rdma: no pair of workload " + w->name +
                         "'s ranks can use RDMA (lab " + st.lab + " rdma: " + st.rdma +
                         (st.rdma_why.empty() ? "" : ", " + st.rdma_why) +
                         "); run `testbedctl doctor` to see why, or use --transport tcp");
    }
  }
  if (o.size_bytes < 4) return bad_input("--size: at least 4 bytes");
  return {};
}

std::vector<Verdict> check_expectations(const scenario::Expect& e, const metrics::RecoveryReport& r,
                                        std::optional<double> busbw_fraction) {
  std::vector<Verdict> out;
  auto add = [&](const char* name, std::optional<double> limit, std::optional<double> measured,
                 bool upper, const std::string& what) {
    if (!limit) return;
    Verdict v{name, *limit, measured, true, ""};
    v.ok = measured && (upper ? *measured <= *limit : *measured >= *limit);
    v.text = fmt::format("{} {} {:g}: measured {} ({})", name, upper ? "<=" : ">=", *limit,
                         measured ? std::to_string(*measured) : "nothing", what);
    out.push_back(v);
  };
  bool undetected = false;
  for (const auto& f : r.faults) undetected = undetected || !f.detection_ms;
  add("max_stall_ms", e.max_stall_ms, r.max_stall_ms(), true, "the longest workload stall");
  add("max_detection_ms", e.max_detection_ms, undetected ? std::nullopt : r.max_detection_ms(),
      true, undetected ? "a fault no control plane reacted to" : "the slowest detection");
  add("max_recovery_ms", e.max_recovery_ms, r.max_outage_ms(), true,
      "the longest data-plane outage on a probed path");
  add("min_busbw_fraction", e.min_busbw_fraction, busbw_fraction, false,
      "workload throughput over the run / before the first fault");
  return out;
}

Result<RunResult> run_scenario(const scenario::Scenario& s, lab::LabState& st, const RunOptions& o,
                               const std::atomic<bool>& stop,
                               const std::function<void(const std::string&)>& progress) {
  TB_TRY(check_run(s, st, o));
  RunResult res;
  const std::string id = run_id();
  res.results_dir = launch::results_root() + "/" + st.lab + "/" + id;
  std::error_code ec;
  fs::create_directories(res.results_dir + "/logs", ec);
  if (ec) return fail("create " + res.results_dir + ": " + ec.message());

  std::vector<fault::Resolved> faults;
  for (const auto& f : s.faults) faults.push_back(*fault::resolve(st, f));
  const auto steps = fault::schedule(faults);
  const int64_t last_step = steps.empty() ? 0 : steps.back().at_ns;
  const int64_t length_ns = last_step + int64_t{o.settle_ms} * 1'000'000;

  auto pairs = probe_pairs(st, faults);
  // Route monitors: every transit router, and the namespaces at the faults' ends.
  std::set<std::string> watch;
  for (const auto& n : st.topo.nodes)
    if (n.kind == plan::NodeKind::kTransitRouter) watch.insert(n.netns);
  for (const auto& f : faults)
    for (size_t l : f.links)
      for (const auto* end : {&st.topo.links[l].a, &st.topo.links[l].b})
        watch.insert(st.topo.node(end->node)->netns);
  for (const auto& p : pairs) watch.insert(st.topo.node(p.src)->netns);
  Monitors monitors;
  TB_TRY(monitors.start({watch.begin(), watch.end()}));

  // The workload, steady.
  std::optional<SteadyWorkload> wl;
  std::string transport = "none (no workload)";
  if (const auto* w = pick_workload(s, o)) {
    workload::Job j;
    j.lab = st.lab;
    j.run_id = id;
    j.results_dir = res.results_dir + "/workload";
    j.store_dir = j.results_dir + "/store";
    j.channels = w->channels;
    j.timeout_ms = o.timeout_ms;
    j.bench.coll = *collective::parse_coll(w->op);
    if (!w->algo.empty()) j.bench.algo = collective::parse_algo(w->algo);
    j.bench.min_bytes = j.bench.max_bytes = o.size_bytes;
    j.bench.warmup = std::max(1, w->warmup);
    j.bench.check = 1;
    j.steady = true;
    j.transport = o.transport;
    j.qps = o.qps;
    j.ib_timeout = o.ib_timeout;
    j.ib_retry_cnt = o.ib_retry_cnt;
    TB_TRY(launch::place_ranks(j, st.topo, *launch::select_ranks(st.topo, w->ranks)));
    launch::mark_rdma_pairs(j, st.rxe);
    transport = o.transport;
    if (o.transport == "rdma") {
      const auto n = workload::count_rdma_pairs(j);
      transport += ": " + std::to_string(n.rdma) + " of " + std::to_string(n.rail) +
                   " rail pair(s) over RDMA verbs (" + std::to_string(o.qps) +
                   " QP(s)/peer, ib_timeout " + std::to_string(o.ib_timeout) + ", retry " +
                   std::to_string(o.ib_retry_cnt) + "), the rest over TCP";
    }
    transport += "; lab rdma: " + st.rdma + (st.rdma_why.empty() ? "" : " (" + st.rdma_why + ")");
    const bool resilient = w->resilient || o.resilient;
    progress("workload " + w->name + ": " + w->op + " of " + std::to_string(o.size_bytes) +
             " bytes over " + std::to_string(j.ranks.size()) + " ranks, steady, transport " +
             transport + (resilient ? ", resilient (the group restarts after a rank fails)" : ""));
    wl.emplace(j, o.tb_rank, resilient, fault::events_path(st.lab));
    TB_TRY(wl->start());
    // The first iterations, bounded by twice the ranks' own timeout.
    if (!wl->wait_iterating(3, int64_t{o.timeout_ms} * 2'000'000, stop))
      res.errors.push_back("the workload did not start iterating");
  }

  // Probes on every path a fault affects, from now to the end and a second more.
  ProbeSet probes;
  TB_TRY(probes.start(st, pairs, res.results_dir, o.tb_probe, o.probe_interval_us,
                      length_ns + 1'000'000'000));
  const int64_t t0 = monotonic_ns();
  (void)append_event(fault::events_path(st.lab), {{"event", "run_start"}, {"run", id}});
  progress("timeline: " + std::to_string(faults.size()) + " fault(s), " +
           std::to_string(steps.size()) + " step(s) over " +
           std::to_string(length_ns / 1'000'000'000) + " s");
  apply::NetlinkKernel kernel;
  fault::Injector injector(st, kernel);
  auto tl = fault::run_timeline(
      injector, faults, steps, t0, stop, [&](const fault::Step& step, const Status& r) {
        progress(fmt::format("{:>8.3f} s  ", (monotonic_ns() - t0) / 1e9) +
                 (step.inject ? "inject " : "revert ") + faults[step.fault].label +
                 (r ? "" : ": FAILED " + r.error().message));
        if (!r) res.errors.push_back(r.error().message);
      });
  while (!stop.load() && monotonic_ns() < t0 + length_ns)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int64_t t_end = monotonic_ns();
  (void)append_event(fault::events_path(st.lab), {{"event", "run_end"}, {"run", id}});

  if (wl) wl->stop(o.timeout_ms, &res.errors);
  auto changes = monitors.stop();
  auto outages = probes.finish(&res.errors);

  // events.jsonl of the run: the lab's events during it, route changes, probe outages and
  // workload iterations, in time order.
  std::vector<nlohmann::json> ev;
  metrics::RecoveryInput in;
  std::vector<metrics::FaultWindow> windows(faults.size());
  for (size_t i = 0; i < faults.size(); ++i)
    windows[i] = {static_cast<int>(i), faults[i].spec.kind, faults[i].label, 0, 0, 0, 0};
  for (const auto& l : read_lines(fault::events_path(st.lab))) {
    auto j = nlohmann::json::parse(l, nullptr, false);
    if (j.is_discarded() || j.value("t_mono_ns", int64_t{0}) < t0 - 1'000'000'000) continue;
    if (j.value("t_mono_ns", int64_t{0}) > t_end) continue;
    const std::string e = j.value("event", "");
    if (e == "agent_path_down" || e == "agent_path_up")
      in.control.push_back(
          {j["t_mono_ns"].get<int64_t>(), e, j.value("node", ""), j.value("path", "")});
    if (e == "fabric_withdraw" || e == "fabric_restore")  // the spines' host routes
      in.control.push_back(
          {j["t_mono_ns"].get<int64_t>(), e, j.value("region", ""), j.value("gpu", "")});
    if ((e == "fault_inject" || e == "fault_revert") && j.contains("fault")) {
      auto& w = windows[j["fault"].get<size_t>()];
      if (e == "fault_inject" && w.inject_ns == 0) {
        w.inject_ns = j.value("effective_ns", j["t_mono_ns"].get<int64_t>());
        w.requested_ns = j.value("requested_ns", w.inject_ns);
      }
      if (e == "fault_revert") {
        w.revert_ns = j.value("effective_ns", j["t_mono_ns"].get<int64_t>());
        w.revert_requested_ns = j.value("requested_ns", w.revert_ns);
      }
    }
    ev.push_back(j);
  }
  for (const auto& [ns, c] : changes) {
    if (c.is_link) {
      const std::string what = c.carrier ? "carrier_up" : "carrier_down";
      ev.push_back({{"event", what}, {"netns", ns}, {"ifname", c.ifname}, {"t_mono_ns", c.t_ns}});
      in.control.push_back({c.t_ns, what, ns, c.ifname});
      continue;
    }
    ev.push_back({{"event", c.added ? "route_add" : "route_del"},
                  {"netns", ns},
                  {"dst", c.dst},
                  {"oif", c.oif},
                  {"nexthops", c.nexthops},
                  {"t_mono_ns", c.t_ns}});
    in.control.push_back({c.t_ns, c.added ? "route_add" : "route_del", ns, c.dst});
  }
  in.outages.resize(faults.size());
  in.probed.assign(faults.size(), false);
  for (const auto& p : pairs)
    for (size_t f : p.faults) in.probed[f] = true;
  for (size_t p = 0; p < pairs.size(); ++p)
    for (const auto& o2 : outages[p]) {
      ev.push_back({{"event", "probe_outage"},
                    {"from", pairs[p].src},
                    {"to", pairs[p].dst},
                    {"t_mono_ns", o2.a},
                    {"end_ns", o2.b},
                    {"ms", (o2.b - o2.a) / 1e6}});
      for (size_t f : pairs[p].faults) in.outages[f].push_back(o2);
    }
  uint64_t wrong = 0;
  if (wl) {
    in.iterations = wl->iterations(&wrong, &res.errors);
    for (size_t i = 0; i < in.iterations.size(); ++i)
      ev.push_back({{"event", "iteration"},
                    {"iter", i},
                    {"start_ns", in.iterations[i].start_ns},
                    {"t_mono_ns", in.iterations[i].end_ns}});
  }
  std::stable_sort(ev.begin(), ev.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a.value("t_mono_ns", int64_t{0}) < b.value("t_mono_ns", int64_t{0});
  });
  {
    std::ofstream out(res.results_dir + "/events.jsonl");
    for (const auto& e : ev) out << e.dump() << "\n";
  }
  in.faults = windows;
  in.run_end_ns = t_end;
  res.recovery = metrics::analyze(in);
  std::optional<double> fraction;
  if (res.recovery.baseline_iter_ms && !in.iterations.empty()) {
    double sum = 0;
    for (const auto& it : in.iterations) sum += (it.end_ns - it.start_ns) / 1e6;
    fraction = *res.recovery.baseline_iter_ms / (sum / in.iterations.size());
  }
  res.verdicts = check_expectations(s.expect, res.recovery, fraction);
  if (wrong > 0)
    res.errors.push_back(std::to_string(wrong) + " wrong elements in the workload's checks");
  if (!tl && res.errors.empty()) res.errors.push_back(tl.error().message);

  nlohmann::json verdicts = nlohmann::json::array();
  for (const auto& v : res.verdicts)
    verdicts.push_back({{"name", v.name},
                        {"limit", v.limit},
                        {"measured", v.measured ? nlohmann::json(*v.measured) : nlohmann::json()},
                        {"ok", v.ok},
                        {"text", v.text}});
  nlohmann::json probe_json = nlohmann::json::array();
  for (const auto& p : pairs)
    probe_json.push_back(
        {{"from", p.src}, {"to", p.dst}, {"addr", p.dst_addr}, {"faults", p.faults}});
  res.summary = {
      {"lab", st.lab},
      {"scenario", s.file},
      {"run", id},
      {"results_dir", res.results_dir},
      {"shaping", st.shaping},
      {"transport", transport},
      {"t0_ns", t0},
      {"t_end_ns", t_end},
      {"iterations", in.iterations.size()},
      {"workload_restarts", wl ? wl->restarts() : 0},
      {"workload_wrong", wrong},
      {"busbw_fraction", fraction ? nlohmann::json(*fraction) : nlohmann::json()},
      {"probes", probe_json},
      {"probe_interval_us", o.probe_interval_us},
      {"recovery", metrics::to_json(res.recovery)},
      {"expect", verdicts},
      {"errors", res.errors},
      {"ok", res.ok()},
      {"measured",
       "CLOCK_MONOTONIC throughout; detection/reroute from route changes seen by "
       "netlink monitors in the routers and faulted nodes; outage from UDP probes every " +
           std::to_string(o.probe_interval_us) +
           " us on each faulted path; stall from the workload's iteration completions "
           "(first start / last end over ranks); link shaping: " +
           (st.shaping.empty() ? "none" : st.shaping)}};
  std::ofstream(res.results_dir + "/summary.json") << res.summary.dump(1) << "\n";
  return res;
}

}  // namespace tb::experiment
