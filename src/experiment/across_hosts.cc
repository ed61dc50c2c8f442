#include "experiment/across_hosts.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/events.h"
#include "experiment/scenario_run.h"
#include "launch/bench_run.h"
#include "multihost/relay.h"
#include "multihost/session.h"
#include "scenario/names.h"

namespace tb::experiment {
namespace {

using std::chrono::milliseconds;

// How far ahead of "now" the coordinator puts t0, so that every host is waiting when it comes.
constexpr int64_t kLeadNs = 1'000'000'000;

// A run's directories as the relay keeps them: the workload's store both ways (none without a
// workload), the joining hosts' ranks' rows and logs into the coordinator's (the stop file is
// each host's own).
multihost::Dirs run_dirs(const std::string& wdir, bool has_workload) {
  return {has_workload ? wdir + "/store" : "", wdir, {"store", "job.json", "stop"}};
}

std::string workload_dir(const std::string& results_dir) {
  return results_dir + "/workload";
}

Result<RunResult> coordinate(const scenario::Scenario& s, lab::LabState& st, const RunOptions& o,
                             const std::atomic<bool>& stop,
                             const std::function<void(const std::string&)>& progress,
                             const launch::JobHosts& hosts, const multihost::Hello& hello,
                             bool has_workload) {
  HostPart part{true, hosts.local, ""};
  ScenarioRun run(s, st, o, stop, progress, &part);
  TB_TRY(run.prepare());
  std::string peers;
  for (const auto& h : hosts.peers) peers += (peers.empty() ? "" : ", ") + h;
  progress("run " + st.lab + " over hosts: this host (" + hosts.me + ") coordinates on " +
           hosts.coordinator_addr.to_string() + ":" + std::to_string(o.rendezvous_port) +
           " and waits for host " + peers + " (start the same `testbedctl run` there)");
  const std::string wdir = workload_dir(run.results_dir());
  auto relay =
      launch::open_relay(hello, hosts, {{"run_id", run.id()}, {"results_dir", run.results_dir()}},
                         has_workload ? wdir + "/store" : "", wdir, o.rendezvous_port, stop);
  if (!relay) return std::unexpected(relay.error());
  auto clocks = relay->measure_clocks(stop);
  if (!clocks) return std::unexpected(clocks.error());
  const auto& offsets = clocks->offset;
  std::string clock_text;
  for (const auto& [h, off] : offsets)
    clock_text += fmt::format("{}host {} {:+.3f} ms (± {:.3f} ms)", clock_text.empty() ? "" : ", ",
                              h, off / 1e6, clocks->error.at(h) / 1e6);
  progress("hosts joined: " + peers + "; clocks against this host's: " + clock_text);
  relay->run_in_background();
  // Whatever fails from here on: the other hosts are told (done, not ok) before returning.
  auto failed = [&](const Error& e) -> Result<RunResult> {
    relay->done({false, 1, run.results_dir()});
    return std::unexpected(e);
  };
  if (auto r = run.start_monitors(); !r) return failed(r.error());
  if (auto r = run.start_workload(); !r) return failed(r.error());
  if (auto* w = run.workload()) {
    std::vector<int64_t> rank_offsets(hosts.rank_host.size(), 0);
    for (size_t r = 0; r < rank_offsets.size(); ++r)
      if (auto it = offsets.find(hosts.rank_host[r]); it != offsets.end())
        rank_offsets[r] = it->second;
    w->set_clock_offsets(std::move(rank_offsets));
    w->on_stop([&relay](int64_t iter) { relay->broadcast({{"stop", iter}}); });
    relay->on_ends([w](const std::vector<multihost::RankEnd>& ends) {
      for (const auto& e : ends) w->remote_exit(static_cast<size_t>(e.rank), e.code, e.how);
    });
  }
  // A host that goes away mid-run (powered off, its network cut: noticed within the session's
  // ~3 s keepalive) ends the run here at once, naming it, instead of after the timeline and
  // the ranks' progress timeout (20.8 s after a guest's power-off, scripts/labvm pair-check).
  relay->on_gone([&run](const std::string&, const std::string& what) { run.cut_short(what); });
  if (auto r = run.start_probe_servers(); !r) return failed(r.error());
  // Every host's ranks started and probe servers listening.
  if (auto r = relay->from_all("ready", milliseconds(int64_t{o.timeout_ms} * 2 + 120'000), stop);
      !r)
    return failed(r.error());
  if (auto r = run.wait_iterating(); !r) return failed(r.error());
  // t0 on this host's clock; each host gets it on its own (its measured offset added), so it
  // fires at the same moment however late the message reaches it.
  const int64_t t0 = monotonic_ns() + kLeadNs;
  relay->start_at(t0, offsets);
  if (auto r = run.start_probe_clients(std::max<int64_t>(0, t0 - monotonic_ns())); !r)
    return failed(r.error());
  run.fire_timeline(t0);
  run.collect();  // the workload's stop iteration goes to every host (on_stop)
  if (!run.workload()) relay->broadcast({{"stop", -1}});
  auto parts = relay->from_all("part", milliseconds(int64_t{o.timeout_ms} + 120'000), stop);
  if (!parts) {
    run.result().errors.push_back(parts.error().message);
  } else {
    for (const auto& [h, p] : *parts) run.merge(h, p, offsets.at(h));
  }
  relay->halt();
  relay->on_gone({});
  relay->on_ends({});  // the workload is summarised next
  for (const auto& e : relay->errors()) run.result().errors.push_back(e);
  RunResult res = run.summarise();
  res.hosts = hosts.summary().empty() ? hosts.me : hosts.summary();
  nlohmann::json clock_json = nlohmann::json::object(), error_json = nlohmann::json::object();
  for (const auto& [h, off] : offsets) clock_json[h] = off;
  for (const auto& [h, err] : clocks->error) error_json[h] = err;
  res.summary["hosts"] = {{"coordinator", hosts.me},
                          {"joined", hosts.peers},
                          {"ranks", hosts.summary()},
                          {"clock_offset_ns", clock_json},
                          {"clock_error_ns", error_json}};
  if (auto w = write_file(res.results_dir + "/summary.json", res.summary.dump(1) + "\n"); !w)
    res.errors.push_back(w.error().message);
  relay->done({res.ok(), res.ok() ? 0 : 1, res.results_dir});
  return res;
}

Result<RunResult> join(const scenario::Scenario& s, lab::LabState& st, const RunOptions& o,
                       const std::atomic<bool>& stop,
                       const std::function<void(const std::string&)>& progress,
                       const launch::JobHosts& hosts, const multihost::Hello& hello,
                       bool has_workload) {
  progress("run " + st.lab + " over hosts: host " + hosts.coordinator +
           " coordinates; joining it on " + hosts.coordinator_addr.to_string() + ":" +
           std::to_string(o.rendezvous_port));
  // This host's workload once it runs, for its ranks' ends (declared before the relay, whose
  // thread reads it).
  SteadyWorkload* workload = nullptr;
  std::mutex workload_mu;
  auto relay =
      multihost::PeerRelay::join(hello, hosts, o.rendezvous_port, launch::kJoinTimeout, stop);
  if (!relay) return std::unexpected(relay.error());
  // The run's id and results directory, the coordinator's.
  auto job = relay->await_job(stop);
  if (!job) return std::unexpected(job.error());
  HostPart part{false, hosts.local, job->value("run_id", "")};
  const std::string their_dir = job->value("results_dir", "");
  if (part.run_id.empty() || their_dir.empty())
    return fail("host " + hosts.coordinator + " sent a run without its id");
  TB_TRY(relay->answer_clocks(std::chrono::seconds(60), stop));
  ScenarioRun run(s, st, o, stop, progress, &part);
  std::atomic<bool> cut{false};  // the coordinator ended the session before this host's part
  // The relay's thread stops before `run` (and its workload) goes, however this returns.
  struct HaltFirst {
    multihost::PeerRelay& r;
    ~HaltFirst() {
      r.halt();
      r.on_gone({});
    }
  } halt_first{*relay};
  // The coordinator gone mid-run (its machine down, the underlay cut: noticed within the
  // session's ~3 s keepalive), or ending it early (it failed on its side), ends the run here
  // too, at once, naming it: this host's faults reverted and its ranks killed, not its whole
  // timeline and the ranks' timeout (28.5 s after the cut on emulated hosts before).
  relay->on_gone([&run, &cut](const std::string& what) {
    cut.store(true);
    run.cut_short(what);
  });
  TB_TRY(run.prepare());
  const std::string wdir = workload_dir(run.results_dir());
  if (auto d = launch::open_results_dir(wdir + "/store"); !d)
    return std::unexpected(with_context(d.error(), "create rendezvous store"));
  // This host's ranks' ends, read from its workload once it runs (a rank still running at the
  // end is killed by the workload's stop).
  relay->attach(run_dirs(wdir, has_workload), hosts.local, [&] {
    std::vector<multihost::RankState> out;
    std::lock_guard lk(workload_mu);
    if (!workload) return out;
    for (const auto& e : workload->rank_states()) out.push_back({e.running, e.code, e.how});
    return out;
  });
  relay->run_in_background();
  TB_TRY(run.start_monitors());
  TB_TRY(run.start_workload());
  {
    std::lock_guard lk(workload_mu);
    workload = run.workload();
  }
  TB_TRY(run.start_probe_servers());
  progress("joined host " + hosts.coordinator + "; " + std::to_string(hosts.local_count()) +
           " workload rank(s) here; results gathered on host " + hosts.coordinator + " in " +
           their_dir);
  TB_TRY(relay->send({{"ready", true}}));
  auto start = relay->await("start", milliseconds(int64_t{o.timeout_ms} * 2 + 180'000), stop);
  if (!start) return std::unexpected(start.error());
  // The coordinator's t0 on this host's clock (its measured offset applied by the coordinator).
  const int64_t t0 = relay->t0_of(*start);
  TB_TRY(run.start_probe_clients(std::max<int64_t>(0, t0 - monotonic_ns())));
  run.fire_timeline(t0);
  // The coordinator's stop iteration once its timeline ended too (bounded: the ranks' timeout
  // and a margin past this host's end).
  auto stop_at = relay->await("stop", milliseconds(int64_t{o.timeout_ms} + 60'000), stop);
  if (!stop_at) run.result().errors.push_back(stop_at.error().message);
  run.collect(stop_at && stop_at->is_number_integer() ? stop_at->get<int64_t>() : -1);
  // This host's errors go in its part: the coordinator's verdict counts them.
  const nlohmann::json part_msg = {{"part", run.part_json()}};
  auto sent = relay->finish(&part_msg);
  RunResult out;
  out.gathered_on = hosts.coordinator;
  out.hosts = hosts.summary();
  out.results_dir = their_dir;
  if (!sent || cut.load()) {
    // No coordinator to judge them: this host's errors are said here (the run cut short names
    // the host that went away or ended it), and why the part could not be sent.
    out.errors = run.result().errors;
    if (!sent && std::ranges::none_of(out.errors, [&](const std::string& e) {
          return e.find(sent.error().message) != std::string::npos;
        }))
      out.errors.push_back(sent.error().message);
    return out;
  }
  auto verdict = relay->verdict(milliseconds(int64_t{o.timeout_ms} + 120'000), stop);
  if (!verdict) {
    out.errors.push_back(verdict.error().message);
  } else if (!verdict->ok) {
    out.errors.push_back("host " + hosts.coordinator + "'s verdict: FAILED");
  }
  return out;
}

}  // namespace

bool spans_hosts(const lab::LabState& st) {
  return !st.host.empty() && st.hosts.size() > 1;
}

Result<launch::JobHosts> run_hosts(const lab::LabState& st,
                                   const std::vector<std::string>& rank_nodes) {
  auto h = launch::hosts_of(st, rank_nodes);
  if (!h) return h;
  if (h->me.empty()) return h;
  if (h->coordinator.empty() && !st.hosts.empty()) {
    h->coordinator = st.hosts.front().name;
    h->coordinator_addr = st.hosts.front().underlay;
  }
  h->peers.clear();
  for (const auto& host : st.hosts)
    if (host.name != h->coordinator) h->peers.push_back(host.name);
  return h;
}

std::vector<std::string> fault_holders(const lab::LabState& st, const fault::Resolved& whole) {
  std::set<std::string> on;
  auto add = [&](const std::string& node) {
    if (const auto* n = st.topo.node(node); n && !n->host.empty()) on.insert(n->host);
  };
  for (size_t l : whole.links) {
    add(st.topo.links[l].a.node);
    add(st.topo.links[l].b.node);
  }
  if (whole.spec.kind == scenario::FaultKind::kRankKill)
    add(scenario::canonical_node(whole.spec.node));
  std::vector<std::string> out;
  for (const auto& h : st.hosts)
    if (on.contains(h.name)) out.push_back(h.name);
  return out;
}

bool fires_here(const lab::LabState& st, const fault::Resolved& whole) {
  if (st.host.empty()) return true;
  const auto h = fault_holders(st, whole);
  return std::find(h.begin(), h.end(), st.host) != h.end();
}

Status check_across_hosts(const scenario::Scenario& s, const lab::LabState& st,
                          const RunOptions& o) {
  if (!spans_hosts(st)) return {};
  const std::string where = "lab " + st.lab + " is spread over several hosts";
  for (const auto& w : s.workloads) {
    if (w.kind != "checkpoint") continue;
    if (w.every_steps > 0)
      return bad_input("[[workload]] " + w.name + ": a checkpoint cadence in steps (every = " +
                       std::to_string(w.every_steps) + ") across hosts is not supported yet (" +
                       where + "); write a duration (every = \"10s\")");
    if (s.expect.max_gold_p99_ms)
      return bad_input("[expect] max_gold_p99_ms across hosts is not supported yet (" + where +
                       "): the gold probe beside checkpoint " + w.name +
                       " runs on one host only; drop it");
  }
  if (o.resilient)
    return bad_input("--resilient across hosts is not supported yet (" + where + ")");
  if (const auto* w = pick_workload(s, o)) {
    if (w->resilient)
      return bad_input("[[workload]] " + w->name +
                       ": resilient = true across hosts is not supported yet (" + where + ")");
    if (w->kind == "command" || w->kind == "training")
      return bad_input("[[workload]] " + w->name + ": " + w->kind +
                       " workloads across hosts are not supported yet (" + where +
                       "); use a collective workload, or --workload none");
  }
  return {};
}

std::string run_digest(const scenario::Scenario& s, const RunOptions& o, const workload::Job* job) {
  nlohmann::json faults = nlohmann::json::array();
  for (const auto& f : s.faults)
    faults.push_back({scenario::to_string(f.kind), f.at.ns, f.a, f.b, f.link, f.node, f.region_a,
                      f.region_b, f.duration.ns, f.period.ns, f.count, f.loss_pct, f.delay.ns});
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nullptr; };
  // Checkpoint workloads: every host runs its part of each on the same cadence.
  nlohmann::json ckpts = nlohmann::json::array();
  for (const auto& w : s.workloads)
    if (w.kind == "checkpoint")
      ckpts.push_back({w.name, w.from, w.to, w.bytes, w.qos, w.mode, w.changed, w.full_every,
                       w.every.ns, w.every_steps, w.streams, w.block});
  const auto& e = s.expect;
  nlohmann::json j = {
      {"checkpoints", ckpts},
      {"workload", o.workload},
      {"job", job ? launch::job_digest(*job) : ""},
      {"size", o.size_bytes},
      {"timeout_ms", o.timeout_ms},
      {"settle_ms", o.settle_ms},
      {"probe_interval_us", o.probe_interval_us},
      {"resilient", o.resilient},
      {"transport", workload::to_string(o.transport.kind)},
      {"faults", faults},
      {"expect",
       {opt(e.max_stall_ms), opt(e.min_busbw_fraction), opt(e.max_detection_ms),
        opt(e.max_recovery_ms), opt(e.max_gold_p99_ms),
        e.checkpoint_on_time ? nlohmann::json(*e.checkpoint_on_time) : nullptr}},
  };
  return multihost::digest(j.dump());
}

Result<RunResult> run_across_hosts(const scenario::Scenario& s, lab::LabState& st,
                                   const RunOptions& o, const std::atomic<bool>& stop,
                                   const std::function<void(const std::string&)>& progress) {
  TB_TRY(check_across_hosts(s, st, o));
  std::optional<workload::Job> job;
  std::vector<std::string> nodes;
  if (const auto* w = pick_workload(s, o)) {
    auto j = steady_job(*w, st, o, "digest", "/digest");
    if (!j) return std::unexpected(j.error());
    TB_TRY(launch::job_hosts(st, *j));  // --transport rdma between hosts: exit 2
    job = std::move(*j);
    for (const auto& r : job->ranks) nodes.push_back(r.node);
  }
  auto hosts = run_hosts(st, nodes);
  if (!hosts) return std::unexpected(hosts.error());
  const multihost::Hello hello{st.lab, hosts->me, "run", st.digest,
                               run_digest(s, o, job ? &*job : nullptr)};
  if (hosts->me == hosts->coordinator)
    return coordinate(s, st, o, stop, progress, *hosts, hello, job.has_value());
  return join(s, st, o, stop, progress, *hosts, hello, job.has_value());
}

}  // namespace tb::experiment
