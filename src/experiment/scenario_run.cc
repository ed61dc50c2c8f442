#include "experiment/scenario_run.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "apply/netlink_kernel.h"
#include "congestion/episodes.h"
#include "core/events.h"
#include "experiment/across_hosts.h"
#include "experiment/train_sweep.h"
#include "fault/link_ops.h"
#include "fault/timeline.h"
#include "launch/bench_run.h"
#include "launch/place.h"
#include "plan/plan.h"
#include "workload/job.h"

namespace tb::experiment {
namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string run_id() {
  char ts[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", std::gmtime(&now));
  return std::string("run-") + ts + "-" + std::to_string(::getpid());
}

}  // namespace

Result<workload::Job> steady_job(const scenario::Workload& w, const lab::LabState& st,
                                 const RunOptions& o, const std::string& id,
                                 const std::string& results_dir) {
  workload::Job j;
  j.lab = st.lab;
  j.run_id = id;
  j.results_dir = results_dir + "/workload";
  j.store_dir = j.results_dir + "/store";
  j.timeout_ms = o.timeout_ms;
  j.bench.coll = *collective::parse_coll(w.op);
  if (!w.algo.empty()) j.bench.algo = collective::parse_algo(w.algo);
  j.bench.min_bytes = j.bench.max_bytes = o.size_bytes;
  j.bench.warmup = std::max(1, w.warmup);
  j.bench.check = 1;
  j.steady = true;
  j.transport = o.transport;
  j.transport.channels = w.channels;  // the [[workload]]'s; run has no --channels
  TB_TRY(launch::place_ranks(j, st.topo, *launch::select_ranks(st.topo, w.ranks)));
  launch::mark_rdma_pairs(j, st.rxe);
  return j;
}

namespace {

// "rdma: 4 of 4 rail pair(s) over RDMA verbs (...), the rest over TCP; lab rdma: rxe (...)"
std::string describe_transport(const workload::Job& j, const lab::LabState& st) {
  std::string out = workload::to_string(j.transport.kind);
  if (j.transport.kind == workload::Transport::kRdma) {
    const auto n = workload::count_rdma_pairs(j);
    out += ": " + std::to_string(n.rdma) + " of " + std::to_string(n.rail) +
           " rail pair(s) over RDMA verbs (" + std::to_string(j.transport.qps) +
           " QP(s)/peer, ib_timeout " + std::to_string(j.transport.ib_timeout) + ", retry " +
           std::to_string(j.transport.ib_retry_cnt) + "), the rest over TCP";
  }
  if (j.transport.intra_server == workload::IntraServer::kShm)
    out +=
        "; intra-server pairs over SHARED MEMORY (--intra-server shm): they bypass the "
        "emulated NVLink links, their shaping and faults";
  return out + "; lab rdma: " + st.rdma + (st.rdma_why.empty() ? "" : " (" + st.rdma_why + ")");
}

nlohmann::json gold_json(const std::optional<GoldProbe>& g) {
  if (!g) return nullptr;
  auto opt = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json();
  };
  return {{"checkpoint", g->checkpoint},
          {"from", g->src},
          {"to", g->dst},
          {"addr", g->addr},
          {"wan", g->wan},
          {"dscp", g->dscp},
          {"interval_us", g->interval_us},
          {"measured", g->measured},
          {"sent", g->sent},
          {"received", g->received},
          {"lost", g->sent - g->received},
          {"p50_ms", g->p50_ms},
          {"p99_ms", g->p99_ms},
          {"max_ms", g->max_ms},
          {"p99_with_lost_ms", opt(g->p99_with_lost_ms)},
          {"text", g->text()}};
}

}  // namespace

const scenario::Workload* pick_workload(const scenario::Scenario& s, const RunOptions& o) {
  if (o.workload == "none") return nullptr;
  for (const auto& w : s.workloads)
    if ((w.kind == "collective" || w.kind == "command" || w.kind == "training") &&
        (o.workload.empty() || w.name == o.workload))
      return &w;
  return nullptr;
}

Status ScenarioRun::prepare() {
  id_ = part_ && !part_->coordinates ? part_->run_id : run_id();
  res_.results_dir = launch::results_root() + "/" + st_.lab + "/" + id_;
  auto dir = launch::open_results_dir(res_.results_dir);
  if (!dir) return std::unexpected(with_context(dir.error(), "create results directory"));
  if (auto logs = dir->sub("logs"); !logs)
    return std::unexpected(with_context(logs.error(), "create results directory"));
  // Resolved on the whole lab (so that every host of a lab over several has the same faults,
  // probes and timeline), then this host's part of each it holds one of (check_run'd).
  lab::LabState whole = st_;
  whole.host.clear();
  for (const auto& f : s_.faults) faults_.push_back(*fault::resolve(whole, f));
  steps_ = fault::schedule(faults_);
  const int64_t last_step = steps_.empty() ? 0 : steps_.back().at_ns;
  length_ns_ = last_step + int64_t{o_.settle_ms} * 1'000'000;
  std::vector<char> held(faults_.size(), 1);
  for (size_t i = 0; i < faults_.size(); ++i) {
    fire_.push_back(faults_[i]);
    if (st_.host.empty()) continue;
    held[i] = fires_here(st_, faults_[i]) ? 1 : 0;
    if (!held[i]) continue;
    auto mine = fault::resolve(st_, faults_[i].spec);
    if (!mine) return std::unexpected(mine.error());
    fire_[i] = std::move(*mine);
  }
  std::erase_if(steps_, [&](const fault::Step& step) { return !held[step.fault]; });
  pairs_ = probe_pairs(st_, faults_);
  // The gold probe: across the first checkpoint workload's WAN, from the last server of `from`
  // (with several, not the first shard's sender) to the first of `to` (the first shard's
  // receiver), at its frontend address, as the checkpoint's senders reach it. Not on a lab over
  // several hosts (check_across_hosts refuses max_gold_p99_ms there).
  for (const auto& w : s_.workloads) {
    if (part_) break;
    if (w.kind != "checkpoint") continue;
    auto plan = plan_checkpoint(s_, w, st_);
    if (!plan) return std::unexpected(plan.error());
    GoldProbe g;
    g.checkpoint = w.name;
    g.src = plan->sources.back();
    g.dst = plan->destinations.front();
    for (const auto& [role, a] : st_.topo.node(g.dst)->addrs)
      if (role == "fe") g.addr = a.addr.to_string();
    g.wan = plan->wan;
    g.dscp = s_.qos.dscp_of("gold");
    gold_pair_.push_back({g.src, g.dst, g.addr, {}, kGoldPort, g.dscp});
    gold_ = g;
    break;
  }
  return {};
}

Status ScenarioRun::start_monitors() {
  // Every transit router, and the namespaces at the faults' ends and the probes' sources.
  std::set<std::string> watch;
  for (const auto& n : st_.topo.nodes)
    if (n.kind == plan::NodeKind::kTransitRouter) watch.insert(n.netns);
  for (const auto& f : faults_)
    for (size_t l : f.links)
      for (const auto* end : {&st_.topo.links[l].a, &st_.topo.links[l].b})
        watch.insert(st_.topo.node(end->node)->netns);
  for (const auto& p : pairs_) watch.insert(st_.topo.node(p.src)->netns);
  // On a lab over several hosts, those of this host's nodes (the others watch theirs).
  std::set<std::string> local;
  for (const auto& n : st_.topo.nodes)
    if (st_.host.empty() || n.host == st_.host) local.insert(n.netns);
  std::erase_if(watch, [&](const std::string& ns) { return !local.contains(ns); });
  return monitors_.start({watch.begin(), watch.end()});
}

Result<launch::CommandJob> command_job(const scenario::Workload& w, const lab::LabState& st,
                                       launch::CommandOptions* o) {
  auto tier = launch::parse_tier(w.tier);
  if (!tier) return std::unexpected(tier.error());
  o->ranks = w.ranks;
  o->tier = *tier;
  o->argv = w.command;
  auto job = launch::prepare_command(st, *o);
  if (!job)
    return std::unexpected(with_context(job.error(), "[[workload]] " + w.name + " (command)"));
  return job;
}

Status ScenarioRun::start_workload() {
  const auto* w = pick_workload(s_, o_);
  if (!w) return start_checkpoints();
  if (w->kind == "command") {
    TB_TRY(start_command(*w));
    return start_checkpoints();
  }
  // A training workload iterates training steps instead of one collective (train_sweep.h).
  const bool training = w->kind == "training";
  auto j = training
               ? training_run_job(s_, *w, st_, o_.transport, o_.timeout_ms, id_, res_.results_dir)
               : steady_job(*w, st_, o_, id_, res_.results_dir);
  if (!j) return std::unexpected(j.error());
  transport_ = describe_transport(*j, st_);
  const bool resilient = w->resilient || o_.resilient;
  const std::string what =
      training ? "training steps (" + std::to_string(w->training.params) + " parameters)"
               : w->op + " of " + std::to_string(o_.size_bytes) + " bytes";
  progress_("workload " + w->name + ": " + what + " over " + std::to_string(j->ranks.size()) +
            " ranks, steady, transport " + transport_ +
            (resilient ? ", resilient (the group restarts after a rank fails)" : ""));
  workload_.emplace(*j, o_.tb_rank, resilient, fault::events_path(st_.lab),
                    part_ ? part_->local : std::vector<char>{});
  TB_TRY(workload_->start());
  if (part_) {
    // The other hosts' ranks: the coordinator hears of their exits; a joining host leaves them
    // to their hosts (done here as far as it is concerned).
    if (!part_->coordinates)
      for (size_t r = 0; r < part_->local.size(); ++r)
        if (!part_->local[r]) workload_->remote_exit(r, 0, "runs on another host");
    return start_checkpoints();  // this host's receivers (their senders from t0)
  }
  TB_TRY(wait_iterating());
  return start_checkpoints();
}

Status ScenarioRun::wait_iterating() {
  // The first iterations, bounded by twice the ranks' own timeout.
  // A host lost before them (cut_short) ends the wait at once.
  if (workload_ && !workload_->wait_iterating(3, int64_t{o_.timeout_ms} * 2'000'000, stop_, &cut_))
    res_.errors.push_back("the workload did not start iterating");
  return {};
}

// Every checkpoint [[workload]], beside the collective or command one (checkpoint_workload.h).
Status ScenarioRun::start_checkpoints() {
  for (const auto& w : s_.workloads) {
    if (w.kind != "checkpoint") continue;
    auto plan = plan_checkpoint(s_, w, st_);
    if (!plan) return std::unexpected(plan.error());
    progress_(fmt::format(
        "workload {}: checkpoint {} -> {}, {} real = {} emulated in {} shard(s) of {}, {} mode, "
        "every {}, {} stream(s) per shard, qos {} (DSCP {}) over {}",
        w.name, w.from, w.to, format_size(w.bytes), format_size(plan->emulated_bytes),
        plan->sources.size(), format_size(plan->shard_bytes), w.mode,
        w.every_steps ? std::to_string(w.every_steps) + " steps" : format_duration(w.every),
        w.streams, w.qos.empty() ? "none" : w.qos, plan->dscp,
        plan->wan.empty() ? std::string("the WAN") : "WAN link " + plan->wan));
    if (!plan->warning.empty()) {
      progress_("warning: " + plan->warning);
      res_.warnings.push_back(plan->warning);
    }
    CheckpointWorkload::WaitSteps wait;
    if (workload_)  // collective or training
      wait = [this](int64_t n, int64_t timeout_ns, const std::atomic<bool>& stop) {
        return workload_->wait_iterating(n, timeout_ns, stop);
      };
    else if (command_)
      wait = [this](int64_t n, int64_t timeout_ns, const std::atomic<bool>& stop) {
        return command_->wait_iterating(n, timeout_ns, stop);
      };
    auto c = std::make_unique<CheckpointWorkload>(s_, w, st_, std::move(*plan), res_.results_dir,
                                                  o_.tb_probe, fault::events_path(st_.lab),
                                                  std::move(wait));
    // Over several hosts: this host's receivers now, its senders from t0 (fire_timeline).
    TB_TRY(part_ ? c->start_receivers() : c->start());
    checkpoints_.push_back(std::move(c));
  }
  return {};
}

Status ScenarioRun::start_command(const scenario::Workload& w) {
  launch::CommandOptions co;
  auto job = command_job(w, st_, &co);
  if (!job) return std::unexpected(job.error());
  job->run_id = id_;
  job->results_dir = res_.results_dir + "/workload";
  std::string cmd;
  for (const auto& a : job->argv) cmd += (cmd.empty() ? "" : " ") + a;
  transport_ =
      std::string("command over ") + launch::to_string(job->tier) + " (" + job->ifname + ")";
  progress_("workload " + w.name + ": " + cmd + " on " + std::to_string(job->ranks.size()) +
            " ranks over " + launch::to_string(job->tier) + " (" + job->ifname + "); " +
            (w.progress.empty() ? "no progress pattern: the whole job is one iteration"
                                : "iterations: lines matching /" + w.progress + "/") +
            "; logs in " + job->results_dir + "/logs");
  command_.emplace(std::move(*job), co, w.progress);
  command_->start();
  // Its first iterations (a framework takes a while to import and rendezvous), bounded.
  if (!w.progress.empty() && !command_->wait_iterating(3, 600'000'000'000, stop_))
    res_.errors.push_back("the command workload did not report 3 iterations (no line matched /" +
                          w.progress + "/, or it ended)");
  return {};
}

Status ScenarioRun::start_probe_servers() {
  return probes_.start_servers(st_, pairs_, res_.results_dir, o_.tb_probe,
                               length_ns_ + 1'000'000'000);
}

Status ScenarioRun::start_probe_clients(int64_t lead_ns) {
  return probes_.start_clients(st_, pairs_, res_.results_dir, o_.tb_probe, o_.probe_interval_us,
                               lead_ns + length_ns_ + 1'000'000'000);
}

Status ScenarioRun::start_probes() {
  // From now to the end of the timeline and a second more.
  TB_TRY(probes_.start(st_, pairs_, res_.results_dir, o_.tb_probe, o_.probe_interval_us,
                       length_ns_ + 1'000'000'000));
  if (gold_pair_.empty()) return {};
  progress_(fmt::format(
      "gold probe: {} -> {} ({}), DSCP {}, one every {} ms across {} "
      "(checkpoint {}'s WAN)",
      gold_->src, gold_->dst, gold_->addr, gold_->dscp, kGoldIntervalUs / 1000,
      gold_->wan.empty() ? std::string("the WAN") : "WAN link " + gold_->wan, gold_->checkpoint));
  // Answers later than a second after the last probe are lost.
  return gold_probe_.start(st_, gold_pair_, res_.results_dir, o_.tb_probe, kGoldIntervalUs,
                           length_ns_ + 1'000'000'000, "gold", 1000);
}

void ScenarioRun::fire_timeline() {
  fire_timeline(monotonic_ns());
}

void ScenarioRun::cut_short(const std::string& why) {
  {
    std::lock_guard lk(cut_mu_);
    if (cut_why_.empty()) cut_why_ = why;
  }
  cut_.store(true);
}

void ScenarioRun::fire_timeline(int64_t t0_ns) {
  // Over several hosts the checkpoints' cadence runs from the same t0 on every host, and no
  // replication is due at or after the timeline's end.
  if (part_)
    for (auto& c : checkpoints_) c->begin(t0_ns, t0_ns + length_ns_);
  // t0 may lie ahead (a lab over several hosts: the coordinator's t0, which every host meets).
  for (int i = 0; i < 100000 && !stop_.load() && !cut_.load() && monotonic_ns() < t0_ns; ++i)
    std::this_thread::sleep_for(
        std::chrono::nanoseconds(std::clamp<int64_t>(t0_ns - monotonic_ns(), 0, 20'000'000)));
  t0_ = t0_ns;
  if (o_.clock) {
    o_.clock->length_ns = length_ns_;
    o_.clock->t0_ns = t0_;
  }
  cg_before_ = congestion::read_counters(lab::lab_dir(st_.lab));
  (void)append_event(fault::events_path(st_.lab), {{"event", "run_start"}, {"run", id_}});
  progress_("timeline: " + std::to_string(faults_.size()) + " fault(s), " +
            std::to_string(steps_.size()) + " step(s) over " +
            std::to_string(length_ns_ / 1'000'000'000) + " s" +
            (st_.host.empty()
                 ? std::string()
                 : " (the steps of the faults host " + st_.host + " holds a part of)"));
  apply::NetlinkKernel kernel;
  fault::Injector injector(st_, kernel);
  // The timeline stops on the caller's stop (Ctrl-C) or a cut_short: cut_ follows stop_.
  std::atomic<bool> fired{false};
  std::thread follow([&] {
    for (int i = 0; i < 100'000'000 && !fired.load(); ++i) {
      if (stop_.load()) cut_.store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  timeline_ = fault::run_timeline(
      injector, fire_, steps_, t0_, cut_, [&](const fault::Step& step, const Status& r) {
        progress_(fmt::format("{:>8.3f} s  ", (monotonic_ns() - t0_) / 1e9) +
                  (step.inject ? "inject " : "revert ") + faults_[step.fault].label +
                  (r ? "" : ": FAILED " + r.error().message));
        if (!r) res_.errors.push_back(r.error().message);
      });
  while (!cut_.load() && monotonic_ns() < t0_ + length_ns_)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fired.store(true);
  follow.join();
  t_end_ = monotonic_ns();
  if (o_.clock) o_.clock->end_ns = t_end_;
  (void)append_event(fault::events_path(st_.lab), {{"event", "run_end"}, {"run", id_}});
}

void ScenarioRun::collect() {
  collect(-1);
}

void ScenarioRun::collect(int64_t stop_iter) {
  // Over several hosts receivers stay up until every host's senders ended (the destructor).
  for (auto& c : checkpoints_) c->stop(&res_.errors, part_ != nullptr);
  const bool cut = cut_.load() && !stop_.load();
  if (cut) {
    std::lock_guard lk(cut_mu_);
    res_.errors.push_back(cut_why_ + ": the run ended early");
  }
  // Cut short, the ranks cannot finish an iteration with the ranks that went: ended at once.
  if (workload_) workload_->stop(cut ? -1 : o_.timeout_ms, &res_.errors, stop_iter);
  if (command_) {
    bool early = false;
    command_->stop(&res_.errors, &early);
    if (early) progress_("the command workload ended before the run did");
  }
  const auto changes = monitors_.stop();
  // Cut short, the probes' planned end is no longer the run's: they end now too.
  const auto outages = probes_.finish(&res_.errors, cut);
  if (gold_) {
    (void)gold_probe_.finish(&res_.errors, cut);
    if (const auto& r = gold_probe_.results(); !r.empty() && r.front()) {
      gold_->measured = true;
      gold_->sent = r.front()->sent;
      gold_->received = r.front()->received;
      gold_->p50_ms = r.front()->summary.p50 / 1000;
      gold_->p99_ms = r.front()->summary.p99 / 1000;
      gold_->max_ms = r.front()->summary.max / 1000;
      if (auto p = percentile_with_lost(r.front()->rtt_us, gold_->sent - gold_->received, 0.99))
        gold_->p99_with_lost_ms = *p / 1000;
    }
    progress_(gold_->text());
    res_.gold = gold_;
  }
  // events.jsonl of the run: the lab's events during it, route changes, probe outages and
  // workload iterations, in time order.
  collect_lab_events();
  collect_route_changes(changes);
  collect_outages(outages);
  collect_iterations();
  collect_congestion();
  write_events();
}

// The counters from t0 to now (the workload stopped) and the episodes overlapping the timeline
// that the agent had written by now (it writes one 10 ms after its last resume, every 0.2 s).
void ScenarioRun::collect_congestion() {
  res_.congestion = congestion::delta(cg_before_, congestion::read_counters(lab::lab_dir(st_.lab)));
  if (res_.congestion.source == congestion::Source::kNoAgent) return;
  const auto episodes = congestion::read_episodes(
      lab::lab_dir(st_.lab) + "/" + congestion::kEpisodesFile, t0_, t_end_);
  std::string text;
  for (const auto& e : episodes) text += congestion::to_json(e).dump() + "\n";
  res_.congestion_episodes = episodes.size();
  if (auto w = write_file(res_.results_dir + "/" + congestion::kEpisodesFile, text); !w)
    res_.errors.push_back(w.error().message);
}

void ScenarioRun::write_events() {
  std::stable_sort(events_.begin(), events_.end(),
                   [](const nlohmann::json& a, const nlohmann::json& b) {
                     return a.value("t_mono_ns", int64_t{0}) < b.value("t_mono_ns", int64_t{0});
                   });
  std::string text;
  for (const auto& e : events_) text += e.dump() + "\n";
  if (auto w = write_file(res_.results_dir + "/events.jsonl", text); !w)
    res_.errors.push_back(w.error().message);
}

nlohmann::json ScenarioRun::part_json() const {
  nlohmann::json events = nlohmann::json::array();
  for (const auto& e : events_) {
    const std::string kind = e.value("event", "");
    if (kind != "probe_outage" && kind != "iteration") events.push_back(e);
  }
  nlohmann::json probes = nlohmann::json::object();
  for (size_t i = 0; i < pairs_.size(); ++i) {
    if (!probes_.client_here(i)) continue;
    std::ifstream in(probes_.client_log(i));
    std::stringstream text;
    text << in.rdbuf();
    probes[std::to_string(i)] = text.str();
  }
  nlohmann::json checkpoints = nlohmann::json::object();
  for (const auto& c : checkpoints_) checkpoints[c->workload().name] = c->to_part();
  return {{"events", events},
          {"probes", probes},
          {"checkpoints", checkpoints},
          {"errors", res_.errors},
          {"warnings", res_.warnings}};
}

namespace {
// `j`'s times moved onto this host's clock.
void shift_times(nlohmann::json& j, int64_t offset_ns) {
  for (const char* k : {"t_mono_ns", "effective_ns", "requested_ns", "end_ns", "start_ns"})
    if (j.contains(k) && j[k].is_number_integer()) j[k] = j[k].get<int64_t>() - offset_ns;
}
}  // namespace

void ScenarioRun::merge(const std::string& host, const nlohmann::json& part, int64_t offset_ns) {
  for (auto e : part.value("events", nlohmann::json::array())) {
    if (!e.is_object()) continue;
    shift_times(e, offset_ns);
    e["host"] = host;
    const std::string kind = e.value("event", "");
    const int64_t t = e.value("t_mono_ns", int64_t{0});
    if (kind == "carrier_up" || kind == "carrier_down")
      in_.control.push_back({t, kind, e.value("netns", ""), e.value("ifname", "")});
    else if (kind == "route_add" || kind == "route_del")
      in_.control.push_back({t, kind, e.value("netns", ""), e.value("dst", "")});
    else
      take_lab_event(e);
    events_.push_back(std::move(e));
  }
  // Its checkpoint replications (the shards whose sources it holds), merged by number.
  const auto ckpts = part.value("checkpoints", nlohmann::json::object());
  for (auto& c : checkpoints_)
    if (ckpts.contains(c->workload().name) && ckpts[c->workload().name].is_array())
      c->merge_part(ckpts[c->workload().name], offset_ns);
  // Its probe clients' logs, kept here beside this host's, and their outages.
  // (a named copy: items() of the temporary value() returns would outlive it)
  const auto probes = part.value("probes", nlohmann::json::object());
  for (const auto& [key, text] : probes.items()) {
    const size_t p = std::strtoul(key.c_str(), nullptr, 10);
    if (p >= pairs_.size() || !text.is_string()) continue;
    const std::string log = res_.results_dir + "/logs/probe-" + std::to_string(p) + ".json";
    if (auto w = write_file(log, text.get<std::string>()); !w)
      res_.errors.push_back(w.error().message);
    auto r = parse_rtt_log(text.get<std::string>());
    if (!r) {
      res_.errors.push_back("probe " + pairs_[p].src + " -> " + pairs_[p].dst + " on host " + host +
                            " printed no result");
      continue;
    }
    for (auto [a, b] : r->outages_ns) {
      const metrics::Interval o{a - offset_ns, b - offset_ns};
      events_.push_back({{"event", "probe_outage"},
                         {"from", pairs_[p].src},
                         {"to", pairs_[p].dst},
                         {"host", host},
                         {"t_mono_ns", o.a},
                         {"end_ns", o.b},
                         {"ms", (o.b - o.a) / 1e6}});
      for (size_t f : pairs_[p].faults) in_.outages[f].push_back(o);
    }
  }
  for (const auto& e : part.value("errors", std::vector<std::string>{}))
    res_.errors.push_back("host " + host + ": " + e);
  for (const auto& w : part.value("warnings", std::vector<std::string>{}))
    res_.warnings.push_back("host " + host + ": " + w);
  write_events();
}

// The lab's events from a second before t0 to the end: control-plane reactions, and each
// fault's window (when it was requested and in force, when it was reverted).
void ScenarioRun::collect_lab_events() {
  in_.faults.resize(faults_.size());
  for (size_t i = 0; i < faults_.size(); ++i)
    in_.faults[i] = {static_cast<int>(i),
                     scenario::to_string(faults_[i].spec.kind),
                     faults_[i].label,
                     0,
                     0,
                     0,
                     0};
  for (const auto& l : read_lines(fault::events_path(st_.lab))) {
    auto j = nlohmann::json::parse(l, nullptr, false);
    if (j.is_discarded() || j.value("t_mono_ns", int64_t{0}) < t0_ - 1'000'000'000) continue;
    if (j.value("t_mono_ns", int64_t{0}) > t_end_) continue;
    take_lab_event(j);
    events_.push_back(j);
  }
}

// A lab event's part in the recovery analysis: a control-plane reaction, a fault's window (its
// first inject and last revert, over every host that fired a part of it).
void ScenarioRun::take_lab_event(const nlohmann::json& j) {
  const std::string e = j.value("event", "");
  if (e == "agent_path_down" || e == "agent_path_up")
    in_.control.push_back(
        {j["t_mono_ns"].get<int64_t>(), e, j.value("node", ""), j.value("path", "")});
  if (e == "fabric_withdraw" || e == "fabric_restore")  // the spines' host routes
    in_.control.push_back(
        {j["t_mono_ns"].get<int64_t>(), e, j.value("region", ""), j.value("gpu", "")});
  if (e == "pfcwd_detect")  // the congestion agent's PFC watchdog found a storm
    in_.control.push_back(
        {j["t_mono_ns"].get<int64_t>(), e, j.value("port", ""),
         "paused " + std::to_string(std::llround(j.value("paused_ms", 0.0))) + " ms"});
  if ((e == "fault_inject" || e == "fault_revert") && j.contains("fault") &&
      j["fault"].get<size_t>() < in_.faults.size()) {
    auto& w = in_.faults[j["fault"].get<size_t>()];
    const int64_t eff = j.value("effective_ns", j["t_mono_ns"].get<int64_t>());
    const int64_t req = j.value("requested_ns", eff);
    if (e == "fault_inject" && (w.inject_ns == 0 || eff < w.inject_ns)) {
      w.inject_ns = eff;
      w.requested_ns = req;
    }
    // A fault ends with its last revert on each host (a flap's last cycle); over several hosts
    // its repair begins with the first host's: that host's routes come back first.
    if (e == "fault_revert") {
      auto& last = last_revert_[j["fault"].get<size_t>()][j.value("host", "")];
      if (eff >= last.first) last = {eff, req};
      w.revert_ns = 0;
      for (const auto& [host, r] : last_revert_[j["fault"].get<size_t>()])
        if (w.revert_ns == 0 || r.first < w.revert_ns) {
          w.revert_ns = r.first;
          w.revert_requested_ns = r.second;
        }
    }
  }
}

// Carrier changes and route changes the monitors saw.
void ScenarioRun::collect_route_changes(
    const std::vector<std::pair<std::string, netlink::RouteChange>>& changes) {
  for (const auto& [ns, c] : changes) {
    if (c.is_link) {
      const std::string what = c.carrier ? "carrier_up" : "carrier_down";
      events_.push_back(
          {{"event", what}, {"netns", ns}, {"ifname", c.ifname}, {"t_mono_ns", c.t_ns}});
      in_.control.push_back({c.t_ns, what, ns, c.ifname});
      continue;
    }
    events_.push_back({{"event", c.added ? "route_add" : "route_del"},
                       {"netns", ns},
                       {"dst", c.dst},
                       {"oif", c.oif},
                       {"nexthops", c.nexthops},
                       {"t_mono_ns", c.t_ns}});
    in_.control.push_back({c.t_ns, c.added ? "route_add" : "route_del", ns, c.dst});
  }
}

// Runs of lost probes, by the faults each probed path serves.
void ScenarioRun::collect_outages(const std::vector<std::vector<metrics::Interval>>& outages) {
  in_.outages.resize(faults_.size());
  in_.probed.assign(faults_.size(), false);
  for (const auto& p : pairs_)
    for (size_t f : p.faults) in_.probed[f] = true;
  for (size_t p = 0; p < pairs_.size(); ++p)
    for (const auto& o : outages[p]) {
      events_.push_back({{"event", "probe_outage"},
                         {"from", pairs_[p].src},
                         {"to", pairs_[p].dst},
                         {"t_mono_ns", o.a},
                         {"end_ns", o.b},
                         {"ms", (o.b - o.a) / 1e6}});
      for (size_t f : pairs_[p].faults) in_.outages[f].push_back(o);
    }
}

// The iterations every rank of the workload completed.
void ScenarioRun::collect_iterations() {
  if (workload_)
    in_.iterations = workload_->iterations(&wrong_, &res_.errors);
  else if (command_)
    in_.iterations = command_->iterations();
  else
    return;
  for (size_t i = 0; i < in_.iterations.size(); ++i)
    events_.push_back({{"event", "iteration"},
                       {"iter", i},
                       {"start_ns", in_.iterations[i].start_ns},
                       {"t_mono_ns", in_.iterations[i].end_ns}});
}

namespace {

// summary.json's "congestion": the window's counters and where its episodes are; null without
// an agent.
nlohmann::json congestion_json(const RunResult& r) {
  if (r.congestion.source == congestion::Source::kNoAgent) return nullptr;
  auto j = congestion::to_json(r.congestion, /*window=*/true);
  j["measured"] =
      "the agent's stats file read at t0 and after the workload stopped; counts are the "
      "difference (this host's agent)";
  j["episodes"] = r.congestion_episodes;
  j["episodes_file"] = std::string(congestion::kEpisodesFile) +
                       " (pauses of one upstream < 10 ms apart merged; CLOCK_MONOTONIC ns)";
  return j;
}

}  // namespace

RunResult ScenarioRun::summarise() {
  in_.run_end_ns = t_end_;
  res_.recovery = metrics::analyze(in_);
  std::optional<double> fraction;
  if (res_.recovery.baseline_iter_ms && !in_.iterations.empty()) {
    double sum = 0;
    for (const auto& it : in_.iterations) sum += (it.end_ns - it.start_ns) / 1e6;
    fraction = *res_.recovery.baseline_iter_ms / (sum / in_.iterations.size());
  }
  res_.verdicts = check_expectations(s_.expect, res_.recovery, fraction);
  // Checkpoints: late replications are a warning, and a failed verdict when [expect] asks.
  nlohmann::json checkpoints = nlohmann::json::array();
  int late = 0, total = 0;
  std::string what;
  for (const auto& c : checkpoints_) {
    checkpoints.push_back(c->to_json(in_.iterations));
    // All finished replications for the warning; from the second on for the verdict: the first
    // is the seed (the standby starts empty, so it is whole in every mode) and says nothing
    // about the cadence.
    int n = 0, l = 0;
    for (const auto& r : c->reps())
      if (r.error != "unfinished when the run ended") {
        ++n, l += !r.on_time;
        if (r.rep > 0) ++total, late += !r.on_time;
      }
    what += (what.empty() ? "" : "; ") + c->workload().name + " every " +
            (c->workload().every_steps ? std::to_string(c->workload().every_steps) + " steps"
                                       : format_duration(c->workload().every));
    if (l > 0)
      res_.warnings.push_back(fmt::format(
          "checkpoint {}: {} of {} replication(s) finished after the next was due (the cadence "
          "did not keep up with the {} link)",
          c->workload().name, l, n, c->plan().wan.empty() ? "WAN" : c->plan().wan));
  }
  if (!what.empty()) what += "; replication 0, the seed, not judged";
  if (auto v = checkpoint_verdict(s_.expect, late, total, what)) res_.verdicts.push_back(*v);
  if (auto v = gold_verdict(s_.expect, res_.gold)) res_.verdicts.push_back(*v);
  if (wrong_ > 0)
    res_.errors.push_back(std::to_string(wrong_) + " wrong elements in the workload's checks");
  if (!timeline_ && res_.errors.empty()) res_.errors.push_back(timeline_.error().message);

  nlohmann::json verdicts = nlohmann::json::array();
  for (const auto& v : res_.verdicts)
    verdicts.push_back({{"name", v.name},
                        {"limit", v.limit},
                        {"measured", v.measured ? nlohmann::json(*v.measured) : nlohmann::json()},
                        {"ok", v.ok},
                        {"text", v.text}});
  nlohmann::json probe_json = nlohmann::json::array();
  for (const auto& p : pairs_)
    probe_json.push_back(
        {{"from", p.src}, {"to", p.dst}, {"addr", p.dst_addr}, {"faults", p.faults}});
  res_.summary = {
      {"lab", st_.lab},
      {"scenario", s_.file},
      {"run", id_},
      {"results_dir", res_.results_dir},
      {"shaping", st_.shaping},
      {"transport", transport_},
      {"t0_ns", t0_},
      {"t_end_ns", t_end_},
      {"iterations", in_.iterations.size()},
      {"workload_restarts", workload_ ? workload_->restarts() : 0},
      {"workload_wrong", wrong_},
      {"busbw_fraction", fraction ? nlohmann::json(*fraction) : nlohmann::json()},
      {"probes", probe_json},
      {"probe_interval_us", o_.probe_interval_us},
      {"recovery", metrics::to_json(res_.recovery)},
      {"expect", verdicts},
      {"checkpoints", checkpoints},
      {"gold", gold_json(res_.gold)},
      {"congestion", congestion_json(res_)},
      {"warnings", res_.warnings},
      {"errors", res_.errors},
      {"ok", res_.ok()},
      {"measured",
       "CLOCK_MONOTONIC throughout; detection/reroute from route changes seen by "
       "netlink monitors in the routers and faulted nodes (a pfc-storm's detection: the "
       "congestion agent's PFC watchdog, pfcwd_detect); outage from UDP probes every " +
           std::to_string(o_.probe_interval_us) +
           " us on each faulted path; stall from the workload's iteration completions "
           "(first start / last end over ranks); link shaping: " +
           (st_.shaping.empty() ? "none" : st_.shaping)}};
  if (auto w = write_file(res_.results_dir + "/summary.json", res_.summary.dump(1) + "\n"); !w)
    res_.errors.push_back(w.error().message);
  return std::move(res_);
}

}  // namespace tb::experiment
