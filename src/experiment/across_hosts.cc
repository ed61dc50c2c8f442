#include "experiment/across_hosts.h"

#include <algorithm>
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
#include "multihost/mirror.h"
#include "multihost/session.h"
#include "scenario/names.h"

namespace tb::experiment {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kClockRounds = 5;
// How far ahead of "now" the coordinator puts t0, so that every host is waiting when it comes.
constexpr int64_t kLeadNs = 1'000'000'000;

std::string fnv(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

// The coordinator's side once the hosts joined: a thread relays store files, rows, logs and the
// other hosts' rank exits (launch::CoordinatorRelay) and keeps the run's own messages for the
// main thread. Every use of the relay is under one mutex.
class CoordinatorLink {
 public:
  CoordinatorLink(launch::CoordinatorRelay relay, std::vector<std::string> peers)
      : relay_(std::move(relay)), peers_(std::move(peers)) {}
  ~CoordinatorLink() { halt(); }

  // The clock exchange (before start()): kClockRounds round trips with each host, one at a
  // time. Offsets per host.
  Result<std::map<std::string, int64_t>> measure_clocks(const std::atomic<bool>& stop) {
    std::map<std::string, int64_t> out;
    for (const auto& h : peers_) {
      std::vector<ClockSample> samples;
      for (int k = 0; k < kClockRounds; ++k) {
        const int64_t sent = monotonic_ns();
        if (auto s = relay_.send(h, {{"clock", sent}}); !s)
          return std::unexpected(with_context(s.error(), "host " + h));
        const auto deadline = Clock::now() + std::chrono::seconds(10);
        bool answered = false;
        for (int i = 0; i < 100000 && !answered && Clock::now() < deadline && !stop.load(); ++i) {
          auto t = relay_.turn(20);
          apply_ends(t.ends);
          for (auto& m : t.other) {
            if (m.host == h && m.body.contains("clock") &&
                m.body["clock"].value("t", int64_t{0}) == sent) {
              samples.push_back(
                  {sent, m.body["clock"].value("host_ns", int64_t{0}), monotonic_ns()});
              answered = true;
            } else if (m.host == h && m.body.contains("closed")) {
              return fail("host " + h + " went away during the clock exchange");
            } else {
              inbox_.push_back(std::move(m));
            }
          }
        }
        if (!answered) return fail("host " + h + " did not answer the clock exchange in 10 s");
      }
      out[h] = clock_offset(samples);
    }
    return out;
  }

  void start() {
    thread_ = std::thread([this] { loop(); });
  }
  void halt() {
    halt_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void set_workload(SteadyWorkload* w) {
    std::lock_guard lk(mu_);
    workload_ = w;
    apply_ends({});
  }
  void broadcast(const nlohmann::json& msg) {
    std::lock_guard lk(mu_);
    relay_.broadcast(msg);
  }
  // Waits until every host sent {key: ...}: their bodies by host. A host that goes away or does
  // not send it within `limit`: an error naming it.
  Result<std::map<std::string, nlohmann::json>> await(const std::string& key, milliseconds limit,
                                                      const std::atomic<bool>& stop) {
    std::map<std::string, nlohmann::json> got;
    const auto deadline = Clock::now() + limit;
    for (int64_t i = 0; i < 100'000'000 && got.size() < peers_.size(); ++i) {
      {
        std::lock_guard lk(mu_);
        for (auto it = inbox_.begin(); it != inbox_.end();) {
          if (it->body.contains(key)) {
            got[it->host] = it->body[key];
            it = inbox_.erase(it);
          } else if (it->body.contains("closed") && !got.contains(it->host)) {
            return fail("host " + it->host + " went away before it sent its " + key);
          } else {
            ++it;
          }
        }
      }
      if (got.size() == peers_.size()) break;
      if (stop.load()) return fail("interrupted while waiting for the other hosts' " + key);
      if (Clock::now() > deadline) {
        std::string missing;
        for (const auto& h : peers_)
          if (!got.contains(h)) missing += (missing.empty() ? "" : ", ") + h;
        return fail("no " + key + " from host " + missing + " within " +
                    std::to_string(limit.count() / 1000) + " s");
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    if (got.size() < peers_.size()) return fail("no " + key + " from every host");
    return got;
  }
  std::vector<std::string> errors() {
    std::lock_guard lk(mu_);
    return relay_.errors();
  }
  void done(bool ok, const std::string& results_dir) {
    halt();
    relay_.broadcast({{"done", {{"ok", ok}, {"results_dir", results_dir}}}});
  }

 private:
  // Ends of other hosts' ranks to the workload (held back until it exists). Under mu_ or before
  // the thread starts.
  void apply_ends(std::vector<launch::RemoteEnd> ends) {
    pending_.insert(pending_.end(), ends.begin(), ends.end());
    if (!workload_) return;
    for (const auto& e : pending_)
      workload_->remote_exit(static_cast<size_t>(e.rank), e.code, e.how);
    pending_.clear();
  }
  void loop() {
    for (int64_t rounds = 0; !halt_.load() && rounds < 1'000'000'000; ++rounds) {
      {
        std::lock_guard lk(mu_);
        auto t = relay_.turn(0);
        apply_ends(std::move(t.ends));
        for (auto& m : t.other) inbox_.push_back(std::move(m));
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  }

  std::mutex mu_;
  launch::CoordinatorRelay relay_;
  const std::vector<std::string> peers_;
  std::vector<multihost::Message> inbox_;
  std::vector<launch::RemoteEnd> pending_;
  SteadyWorkload* workload_ = nullptr;
  std::atomic<bool> halt_{false};
  std::thread thread_;
};

// A joining host's side: a thread sends this host's store files, ranks' rows and logs and their
// exits, writes the coordinator's store files and keeps the run's own messages for the main
// thread. Every use of the connection is under one mutex.
class PeerLink {
 public:
  PeerLink(multihost::Peer peer, std::string coordinator, std::vector<char> local,
           std::vector<nlohmann::json> early)
      : peer_(std::move(peer)),
        coordinator_(std::move(coordinator)),
        local_(std::move(local)),
        inbox_(std::move(early)) {}
  ~PeerLink() { halt(); }

  // The coordinator's clock exchange (main thread, before start()).
  Status answer_clocks(const std::atomic<bool>& stop) {
    int answered = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    for (int i = 0;
         i < 100000 && answered < kClockRounds && Clock::now() < deadline && !stop.load(); ++i) {
      std::vector<nlohmann::json> got;
      for (auto it = inbox_.begin(); it != inbox_.end();) {
        got.push_back(std::move(*it));
        it = inbox_.erase(it);
      }
      auto more = peer_.receive(20);
      if (!more) return std::unexpected(more.error());
      got.insert(got.end(), more->begin(), more->end());
      std::vector<nlohmann::json> keep;
      for (auto& m : got) {
        if (m.contains("clock")) {
          TB_TRY(peer_.send(
              {{"clock", {{"t", m["clock"].get<int64_t>()}, {"host_ns", monotonic_ns()}}}}));
          ++answered;
        } else if (m.contains("closed")) {
          return fail("host " + coordinator_ + " went away during the clock exchange");
        } else {
          keep.push_back(std::move(m));
        }
      }
      inbox_.insert(inbox_.end(), keep.begin(), keep.end());
    }
    if (answered < kClockRounds) return fail("no clock exchange from host " + coordinator_);
    return {};
  }

  // Starts relaying; `store_dir` "" : no workload.
  void start(const std::string& store_dir, const std::string& results_dir) {
    if (!store_dir.empty()) store_.emplace(store_dir, multihost::DirMirror::Mode::kWhole);
    results_.emplace(results_dir, multihost::DirMirror::Mode::kAppend,
                     std::set<std::string>{"store", "job.json", "stop"});
    exit_sent_.assign(local_.size(), 0);
    thread_ = std::thread([this] { loop(); });
  }
  void halt() {
    halt_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void set_workload(SteadyWorkload* w) {
    std::lock_guard lk(mu_);
    workload_ = w;
  }
  Status send(const nlohmann::json& msg) {
    std::lock_guard lk(mu_);
    return peer_.send(msg);
  }
  // The coordinator's {key: ...}, waiting at most `limit`.
  Result<nlohmann::json> await(const std::string& key, milliseconds limit,
                               const std::atomic<bool>& stop) {
    const auto deadline = Clock::now() + limit;
    for (int64_t i = 0; i < 1'000'000'000; ++i) {
      {
        std::lock_guard lk(mu_);
        for (auto it = inbox_.begin(); it != inbox_.end(); ++it)
          if (it->contains(key)) {
            nlohmann::json v = (*it)[key];
            inbox_.erase(it);
            return v;
          }
        for (const auto& m : inbox_)  // it ended the run (it failed on its side)
          if (m.contains("done"))
            return fail("host " + coordinator_ + " ended the run before it sent " + key +
                        " (see its output)");
        if (closed_) return fail("host " + coordinator_ + " went away before it sent " + key);
        for (const auto& e : errors_)
          if (!e.empty()) return fail(e);
      }
      if (stop.load()) return fail("interrupted while waiting for host " + coordinator_);
      if (Clock::now() > deadline) break;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return fail("no " + key + " from host " + coordinator_ + " within " +
                std::to_string(limit.count() / 1000) + " s");
  }
  // This host's last files and rank exits, then its part.
  Status finish(const nlohmann::json& part) {
    halt();
    send_files(true);
    send_exits(true);
    TB_TRY(peer_.send({{"bye", true}}));
    return peer_.send({{"part", part}});
  }
  // After finish(): the coordinator's verdict.
  Result<nlohmann::json> verdict(milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    for (int i = 0; i < 10'000'000 && Clock::now() < deadline; ++i) {
      for (const auto& m : inbox_)
        if (m.contains("done")) return m["done"];
      inbox_.clear();
      auto got = peer_.receive(50);
      if (!got) return std::unexpected(got.error());
      for (auto& m : *got) {  // in order: its verdict comes before it closes
        if (m.contains("done")) return m["done"];
        if (m.contains("closed"))
          return fail("host " + coordinator_ + " went away before its verdict");
      }
    }
    return fail("no verdict from host " + coordinator_ + " within " +
                std::to_string(limit.count() / 1000) + " s");
  }

 private:
  void send_files(bool final) {
    if (store_)
      for (auto& c : store_->scan()) (void)peer_.send({{"put", multihost::to_json(c)}});
    if (results_)
      for (auto& c : results_->scan(final)) (void)peer_.send({{"append", multihost::to_json(c)}});
  }
  // This host's ranks that ended since the last call; `all`: every one not yet said (the run
  // is over: a rank still running is killed by its workload's stop).
  void send_exits(bool all) {
    if (!workload_) return;
    const auto states = workload_->rank_states();
    for (size_t r = 0; r < local_.size(); ++r) {
      if (!local_[r] || exit_sent_[r]) continue;
      const bool known = r < states.size();
      if (!all && (!known || states[r].running)) continue;
      send_files(true);  // its last rows and log lines before its exit
      (void)peer_.send({{"exit",
                         {{"rank", r},
                          {"code", known ? states[r].code : 128 + 9},
                          {"how", known ? states[r].how : std::string("never started")}}}});
      exit_sent_[r] = 1;
    }
  }
  void loop() {
    for (int64_t rounds = 0; !halt_.load() && rounds < 1'000'000'000; ++rounds) {
      {
        std::lock_guard lk(mu_);
        send_files(false);
        send_exits(false);
        auto got = peer_.receive(10);
        if (!got) {
          errors_.push_back(got.error().message);
        } else {
          for (auto& m : *got) {
            if (m.contains("put")) {
              auto c = multihost::chunk_from_json(m["put"]);
              Status w = !c       ? Status(std::unexpected(c.error()))
                         : store_ ? store_->apply(*c)
                                  : Status{};
              if (!w)
                errors_.push_back("store file from host " + coordinator_ + ": " +
                                  w.error().message);
            } else if (m.contains("closed")) {
              closed_ = true;
            } else if (!m.contains("kill")) {  // kill: the workload's own stop and limits act
              inbox_.push_back(std::move(m));
            }
          }
        }
        if (closed_ || !errors_.empty()) break;
      }
      std::this_thread::sleep_for(milliseconds(5));
    }
  }

  std::mutex mu_;
  multihost::Peer peer_;
  const std::string coordinator_;
  const std::vector<char> local_;
  std::vector<nlohmann::json> inbox_;
  std::optional<multihost::DirMirror> store_, results_;
  std::vector<char> exit_sent_;
  SteadyWorkload* workload_ = nullptr;
  bool closed_ = false;
  std::vector<std::string> errors_;
  std::atomic<bool> halt_{false};
  std::thread thread_;
};

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
  auto relay = launch::CoordinatorRelay::open(
      hello, hosts, {{"run_id", run.id()}, {"results_dir", run.results_dir()}},
      has_workload ? wdir + "/store" : "", wdir, o.rendezvous_port, stop);
  if (!relay) return std::unexpected(relay.error());
  CoordinatorLink link(std::move(*relay), hosts.peers);
  auto offsets = link.measure_clocks(stop);
  if (!offsets) return std::unexpected(offsets.error());
  std::string clocks;
  for (const auto& [h, off] : *offsets)
    clocks += fmt::format("{}host {} {:+.3f} ms", clocks.empty() ? "" : ", ", h, off / 1e6);
  progress("hosts joined: " + peers + "; clocks against this host's: " + clocks);
  link.start();
  // Whatever fails from here on: the other hosts are told (done, not ok) before returning.
  auto failed = [&](const Error& e) -> Result<RunResult> {
    link.done(false, run.results_dir());
    return std::unexpected(e);
  };
  if (auto r = run.start_monitors(); !r) return failed(r.error());
  if (auto r = run.start_workload(); !r) return failed(r.error());
  if (auto* w = run.workload()) {
    std::vector<int64_t> rank_offsets(hosts.rank_host.size(), 0);
    for (size_t r = 0; r < rank_offsets.size(); ++r)
      if (auto it = offsets->find(hosts.rank_host[r]); it != offsets->end())
        rank_offsets[r] = it->second;
    w->set_clock_offsets(std::move(rank_offsets));
    w->on_stop([&link](int64_t iter) { link.broadcast({{"stop", iter}}); });
    link.set_workload(w);
  }
  if (auto r = run.start_probe_servers(); !r) return failed(r.error());
  // Every host's ranks started and probe servers listening.
  if (auto r = link.await("ready", milliseconds(int64_t{o.timeout_ms} * 2 + 120'000), stop); !r)
    return failed(r.error());
  if (auto r = run.wait_iterating(); !r) return failed(r.error());
  const int64_t t0 = monotonic_ns() + kLeadNs;
  link.broadcast({{"start", {{"in_ns", t0 - monotonic_ns()}}}});
  if (auto r = run.start_probe_clients(std::max<int64_t>(0, t0 - monotonic_ns())); !r)
    return failed(r.error());
  run.fire_timeline(t0);
  run.collect();  // the workload's stop iteration goes to every host (on_stop)
  if (!run.workload()) link.broadcast({{"stop", -1}});
  auto parts = link.await("part", milliseconds(int64_t{o.timeout_ms} + 120'000), stop);
  if (!parts) {
    run.result().errors.push_back(parts.error().message);
  } else {
    for (const auto& [h, p] : *parts) run.merge(h, p, offsets->at(h));
  }
  for (const auto& e : link.errors()) run.result().errors.push_back(e);
  RunResult res = run.summarise();
  res.hosts = hosts.summary().empty() ? hosts.me : hosts.summary();
  nlohmann::json clock_json = nlohmann::json::object();
  for (const auto& [h, off] : *offsets) clock_json[h] = off;
  res.summary["hosts"] = {{"coordinator", hosts.me},
                          {"joined", hosts.peers},
                          {"ranks", hosts.summary()},
                          {"clock_offset_ns", clock_json}};
  if (auto w = write_file(res.results_dir + "/summary.json", res.summary.dump(1) + "\n"); !w)
    res.errors.push_back(w.error().message);
  link.done(res.ok(), res.results_dir);
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
  auto peer = multihost::Peer::join(hello, hosts.coordinator, hosts.coordinator_addr,
                                    o.rendezvous_port, launch::kJoinTimeout, stop);
  if (!peer) return std::unexpected(peer.error());
  // The run's id and results directory, the coordinator's (with what came after it).
  std::optional<nlohmann::json> job;
  std::vector<nlohmann::json> early;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (int i = 0; i < 100000 && !job && Clock::now() < deadline && !stop.load(); ++i) {
    auto got = peer->receive(100);
    if (!got) return std::unexpected(got.error());
    for (auto& m : *got) {
      if (m.contains("closed")) return fail("host " + hosts.coordinator + " went away");
      if (m.contains("refused"))
        return bad_input("host " + hosts.coordinator + ": " + m["refused"].get<std::string>());
      if (job)
        early.push_back(std::move(m));
      else if (m.contains("job"))
        job = m["job"];
    }
  }
  if (!job) return fail("no run from host " + hosts.coordinator + " within 30 s");
  HostPart part{false, hosts.local, job->value("run_id", "")};
  const std::string their_dir = job->value("results_dir", "");
  if (part.run_id.empty() || their_dir.empty())
    return fail("host " + hosts.coordinator + " sent a run without its id");
  PeerLink link(std::move(*peer), hosts.coordinator, hosts.local, std::move(early));
  TB_TRY(link.answer_clocks(stop));
  ScenarioRun run(s, st, o, stop, progress, &part);
  TB_TRY(run.prepare());
  const std::string wdir = workload_dir(run.results_dir());
  if (auto d = launch::open_results_dir(wdir + "/store"); !d)
    return std::unexpected(with_context(d.error(), "create rendezvous store"));
  link.start(has_workload ? wdir + "/store" : "", wdir);
  TB_TRY(run.start_monitors());
  TB_TRY(run.start_workload());
  link.set_workload(run.workload());
  TB_TRY(run.start_probe_servers());
  progress("joined host " + hosts.coordinator + "; " + std::to_string(hosts.local_count()) +
           " workload rank(s) here; results gathered on host " + hosts.coordinator + " in " +
           their_dir);
  TB_TRY(link.send({{"ready", true}}));
  auto start = link.await("start", milliseconds(int64_t{o.timeout_ms} * 2 + 180'000), stop);
  if (!start) return std::unexpected(start.error());
  const int64_t in_ns = std::clamp<int64_t>(start->value("in_ns", int64_t{0}), 0, 60'000'000'000);
  const int64_t t0 = monotonic_ns() + in_ns;
  TB_TRY(run.start_probe_clients(in_ns));
  run.fire_timeline(t0);
  // The coordinator's stop iteration once its timeline ended too (bounded: the ranks' timeout
  // and a margin past this host's end).
  auto stop_at = link.await("stop", milliseconds(int64_t{o.timeout_ms} + 60'000), stop);
  if (!stop_at) run.result().errors.push_back(stop_at.error().message);
  run.collect(stop_at && stop_at->is_number_integer() ? stop_at->get<int64_t>() : -1);
  // This host's errors go in its part: the coordinator's verdict counts them.
  TB_TRY(link.finish(run.part_json()));
  auto verdict = link.verdict(milliseconds(int64_t{o.timeout_ms} + 120'000));
  RunResult out;
  out.gathered_on = hosts.coordinator;
  out.hosts = hosts.summary();
  out.results_dir = their_dir;
  if (!verdict) {
    out.errors.push_back(verdict.error().message);
  } else if (!verdict->value("ok", false)) {
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
  return fnv(j.dump());
}

int64_t clock_offset(const std::vector<ClockSample>& samples) {
  const ClockSample* best = nullptr;
  for (const auto& c : samples)
    if (!best || c.received_ns - c.sent_ns < best->received_ns - best->sent_ns) best = &c;
  if (!best) return 0;
  return best->host_ns - (best->sent_ns + (best->received_ns - best->sent_ns) / 2);
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
