#include "experiment/checkpoint_workload.h"

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "core/events.h"
#include "core/process.h"
#include "launch/bench_run.h"
#include "plan/plan.h"
#include "runner/supervisor.h"
#include "shaping/link_shape.h"

namespace tb::experiment {
namespace {

constexpr uint16_t kBasePort = 7200;  // + the workload's index; run's probes use 7100 + i
constexpr int64_t kReadyTimeoutNs = 5'000'000'000;
constexpr int64_t kMinRepTimeoutNs = 60'000'000'000;
constexpr int64_t kStopGraceNs = 10'000'000'000;   // a replication in flight at the run's end
constexpr int64_t kForeverNs = 3'600'000'000'000;  // a step cadence waits this long at most

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

std::vector<nlohmann::json> json_lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) {
    auto j = nlohmann::json::parse(l, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

std::string flat(const std::string& node) {
  std::string s = node;
  std::replace(s.begin(), s.end(), '/', '-');
  return s;
}

// Average bytes one replication sends, of a checkpoint of `bytes`.
double average_bytes(const scenario::Workload& w, double bytes) {
  if (w.mode == "incremental") return bytes * w.changed;
  if (w.mode == "layered") return (bytes + (w.full_every - 1) * bytes * w.changed) / w.full_every;
  return bytes;
}

double median_ms(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

StepSplit split_steps(const std::vector<metrics::Iteration>& iterations,
                      const std::vector<CheckpointRep>& reps) {
  std::vector<double> during, outside;
  for (const auto& it : iterations) {
    const bool overlaps = std::ranges::any_of(reps, [&](const CheckpointRep& r) {
      return it.start_ns < r.end_ns && it.end_ns > r.start_ns;
    });
    (overlaps ? during : outside).push_back((it.end_ns - it.start_ns) / 1e6);
  }
  StepSplit out;
  out.during = static_cast<int>(during.size());
  out.outside = static_cast<int>(outside.size());
  out.during_ms = median_ms(std::move(during));
  out.outside_ms = median_ms(std::move(outside));
  return out;
}

Result<CheckpointPlan> plan_checkpoint(const scenario::Scenario& s, const scenario::Workload& w,
                                       const lab::LabState& st) {
  CheckpointPlan p;
  for (const auto& n : st.topo.nodes) {
    if (n.kind != plan::NodeKind::kServer) continue;
    if (n.region == w.from) p.sources.push_back(n.name);
    if (n.region == w.to) p.destinations.push_back(n.name);
  }
  if (p.sources.empty() || p.destinations.empty())
    return bad_input("[[workload]] " + w.name + " (checkpoint): region " +
                     (p.sources.empty() ? w.from : w.to) + " has no servers in lab " + st.lab);
  if (w.every_steps > 0 && !std::ranges::any_of(s.workloads, [](const scenario::Workload& o) {
        return o.kind == "collective" || o.kind == "command" || o.kind == "training";
      }))
    return bad_input("[[workload]] " + w.name +
                     " (checkpoint): every = " + std::to_string(w.every_steps) +
                     " counts steps of the run's collective, command or training workload, and "
                     "the scenario has none; write a duration (every = \"10s\")");
  const double emulated =
      std::max(1.0, std::round(static_cast<double>(w.bytes) / std::max(1.0, s.scale.bandwidth)));
  p.emulated_bytes = static_cast<uint64_t>(emulated);
  p.shard_bytes = (p.emulated_bytes + p.sources.size() - 1) / p.sources.size();
  p.dscp = s.qos.dscp_of(w.qos);
  for (const auto& l : st.topo.links) {
    if (l.tier != plan::Tier::kWan || l.role != "primary") continue;
    const auto* a = st.topo.node(l.a.node);
    const auto* b = st.topo.node(l.b.node);
    if (!a || !b) continue;
    if ((a->region == w.from && b->region == w.to) || (a->region == w.to && b->region == w.from)) {
      p.wan = l.wan;
      p.wan_bps = l.emulated.rate > shaping::kHostVethRate ? 0 : l.emulated.rate.bps;
    }
  }
  if (p.wan_bps > 0) {
    p.min_seconds = average_bytes(w, emulated) * 8 / p.wan_bps;
    if (w.every_steps == 0 && p.min_seconds > w.every.ns / 1e9)
      p.warning = fmt::format(
          "checkpoint {} cannot keep up: a replication sends {} on average ({} mode), which "
          "needs at least {:.2f} s at the {} link's {} (emulated), and one is due every {:.2f} "
          "s: the checkpoint floods the WAN",
          w.name, format_size(static_cast<uint64_t>(average_bytes(w, emulated))), w.mode,
          p.min_seconds, p.wan, format_rate(Rate{p.wan_bps}), w.every.ns / 1e9);
  }
  return p;
}

nlohmann::json rep_to_json(const CheckpointRep& r) {
  nlohmann::json shards = nlohmann::json::array();
  for (const auto& s : r.shards)
    shards.push_back({{"shard", s.shard},
                      {"from", s.from},
                      {"to", s.to},
                      {"payload_bytes", s.payload},
                      {"checksum", fmt::format("{:016x}", s.checksum)},
                      {"receiver_checksum", fmt::format("{:016x}", s.receiver_checksum)},
                      {"ok", s.ok}});
  return {{"rep", r.rep},
          {"full", r.full},
          {"payload_bytes", r.payload},
          {"wire_bytes", r.wire},
          {"seconds", r.seconds},
          {"wan_utilisation", r.wan_utilisation},
          {"ok", r.ok},
          {"on_time", r.on_time},
          {"due_ns", r.due_ns},
          {"start_ns", r.start_ns},
          {"end_ns", r.end_ns},
          {"error", r.error},
          {"shards", shards}};
}

CheckpointRep rep_from_json(const nlohmann::json& j) {
  CheckpointRep r;
  r.rep = j.value("rep", 0);
  r.full = j.value("full", false);
  r.payload = j.value("payload_bytes", uint64_t{0});
  r.wire = j.value("wire_bytes", uint64_t{0});
  r.seconds = j.value("seconds", 0.0);
  r.wan_utilisation = j.value("wan_utilisation", 0.0);
  r.ok = j.value("ok", false);
  r.on_time = j.value("on_time", false);
  r.due_ns = j.value("due_ns", int64_t{0});
  r.start_ns = j.value("start_ns", int64_t{0});
  r.end_ns = j.value("end_ns", int64_t{0});
  r.error = j.value("error", "");
  for (const auto& s : j.value("shards", nlohmann::json::array())) {
    if (!s.is_object()) continue;
    auto hex = [&](const char* k) { return std::strtoull(s.value(k, "0").c_str(), nullptr, 16); };
    r.shards.push_back({s.value("shard", 0), s.value("from", ""), s.value("to", ""),
                        s.value("payload_bytes", uint64_t{0}), hex("checksum"),
                        hex("receiver_checksum"), s.value("ok", false)});
  }
  return r;
}

void merge_rep(CheckpointRep& a, const CheckpointRep& b) {
  a.full = a.full || b.full;
  a.payload += b.payload;
  a.wire += b.wire;
  a.due_ns = std::min(a.due_ns, b.due_ns);
  a.start_ns = std::min(a.start_ns, b.start_ns);
  a.end_ns = std::max(a.end_ns, b.end_ns);
  a.seconds = (a.end_ns - a.start_ns) / 1e9;
  a.ok = a.ok && b.ok;
  a.on_time = a.on_time && b.on_time;
  if (a.error.empty()) a.error = b.error;
  a.shards.insert(a.shards.end(), b.shards.begin(), b.shards.end());  // wan_utilisation: caller
  std::ranges::sort(a.shards, {}, &CheckpointShard::shard);
}

CheckpointWorkload::~CheckpointWorkload() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (!receivers_.empty()) terminate(receivers_, 1000);
}

bool CheckpointWorkload::here(const std::string& node) const {
  if (st_.host.empty()) return true;
  const auto* n = st_.topo.node(node);
  return n && n->host == st_.host;
}

Status CheckpointWorkload::start() {
  TB_TRY(start_receivers());
  begin(monotonic_ns(), 0);
  return {};
}

Status CheckpointWorkload::start_receivers() {
  if (w_.every_steps > 0 && !wait_steps_)
    return bad_input("[[workload]] " + w_.name +
                     " (checkpoint): every = " + std::to_string(w_.every_steps) +
                     " counts the run's workload iterations, and this run has no collective, "
                     "command or training workload (--workload none?); write a duration (every = "
                     "\"10s\")");
  size_t index = 0;
  for (size_t i = 0; i < s_.workloads.size(); ++i)
    if (&s_.workloads[i] == &w_) index = i;
  port_ = static_cast<uint16_t>(kBasePort + index);
  auto root = launch::open_results_dir(dir_);
  if (!root) return std::unexpected(root.error());
  auto base = root->sub("checkpoint/" + w_.name);
  if (!base) return std::unexpected(base.error());
  const std::string owner = plan::owner_marker(st_.lab);
  std::vector<std::string> logs;
  for (const auto& d : plan_.destinations) {
    if (!here(d)) continue;  // another host's receiver
    auto sub = base->sub(flat(d));
    if (!sub) return std::unexpected(sub.error());
    const std::string log = dir_ + "/logs/ckpt-recv-" + w_.name + "-" + flat(d) + ".log";
    auto pid = runner::spawn_in_netns(
        st_.topo.node(d)->netns,
        {tb_probe_, "ckpt-recv", "--port", std::to_string(port_), "--dir", sub->path(), "--dscp",
         std::to_string(plan_.dscp), "--seconds", "86400"},
        owner, log);
    if (!pid) return std::unexpected(pid.error());
    receivers_.push_back(*pid);
    logs.push_back(log);
  }
  // Every receiver listening before the first replication.
  const int64_t deadline = monotonic_ns() + kReadyTimeoutNs;
  for (const auto& log : logs) {
    bool ready = false;
    while (!ready && monotonic_ns() < deadline) {
      for (const auto& j : json_lines(log)) ready = ready || j.value("event", "") == "ready";
      if (!ready) sleep_ms(20);
    }
    if (!ready) return fail("checkpoint receiver did not start listening: see " + log);
  }
  return {};
}

void CheckpointWorkload::begin(int64_t t0_ns, int64_t end_ns) {
  if (!std::ranges::any_of(plan_.sources, [&](const std::string& n) { return here(n); })) return;
  thread_ = std::thread([this, t0_ns, end_ns] { cadence(t0_ns, end_ns); });
}

void CheckpointWorkload::cadence(int64_t t0, int64_t end_ns) {
  for (int rep = 0; !stopping_.load(); ++rep) {
    int64_t due = t0 + rep * w_.every.ns;
    if (end_ns > 0 && due >= end_ns) break;  // over several hosts: every host stops alike
    if (w_.every_steps > 0) {
      if (rep > 0 && !wait_steps_(int64_t{rep} * w_.every_steps, kForeverNs, stopping_)) break;
      due = monotonic_ns();
    }
    while (!stopping_.load() && monotonic_ns() < due) sleep_ms(10);
    if (stopping_.load()) break;
    CheckpointRep r = replicate(rep, due);
    // On time: ended before the next was due, by the clock or by the workload's steps (the
    // same count that starts the next one; asked now, as the replication has just ended).
    if (w_.every_steps == 0)
      r.on_time = r.end_ns <= t0 + (rep + 1) * w_.every.ns;
    else
      r.on_time = !wait_steps_(int64_t{rep + 1} * w_.every_steps, 0, stopping_);
    (void)append_event(events_, {{"event", "checkpoint_rep"},
                                 {"workload", w_.name},
                                 {"rep", r.rep},
                                 {"full", r.full},
                                 {"payload_bytes", r.payload},
                                 {"seconds", r.seconds},
                                 {"ok", r.ok},
                                 {"on_time", r.on_time},
                                 {"start_ns", r.start_ns},
                                 {"end_ns", r.end_ns}});
    std::lock_guard<std::mutex> l(mu_);
    reps_.push_back(std::move(r));
  }
}

CheckpointRep CheckpointWorkload::replicate(int rep, int64_t due_ns) {
  CheckpointRep r;
  r.rep = rep;
  r.due_ns = due_ns;
  r.start_ns = monotonic_ns();
  const std::string owner = plan::owner_marker(st_.lab);
  const int64_t timeout_ns =
      std::max<int64_t>(kMinRepTimeoutNs, static_cast<int64_t>(plan_.min_seconds * 20e9));
  std::vector<int> pids;
  std::vector<std::string> logs;
  std::vector<size_t> shard;  // of each sender started
  for (size_t i = 0; i < plan_.sources.size(); ++i) {
    if (!here(plan_.sources[i])) continue;  // another host's shard
    const std::string& dst = plan_.destinations[i % plan_.destinations.size()];
    const auto* dn = st_.topo.node(dst);
    std::string addr;
    for (const auto& [role, a] : dn->addrs)
      if (role == "fe") addr = a.addr.to_string();
    const std::string log = dir_ + "/logs/ckpt-send-" + w_.name + "-r" + std::to_string(rep) +
                            "-s" + std::to_string(i) + ".json";
    auto pid = runner::spawn_in_netns(st_.topo.node(plan_.sources[i])->netns,
                                      {tb_probe_,      "ckpt-send",
                                       "--to",         addr,
                                       "--port",       std::to_string(port_),
                                       "--shard",      std::to_string(i),
                                       "--bytes",      std::to_string(plan_.shard_bytes),
                                       "--block",      std::to_string(w_.block),
                                       "--seed",       std::to_string(1000 + i),
                                       "--mode",       w_.mode,
                                       "--changed",    fmt::format("{}", w_.changed),
                                       "--full-every", std::to_string(w_.full_every),
                                       "--rep",        std::to_string(rep),
                                       "--streams",    std::to_string(w_.streams),
                                       "--dscp",       std::to_string(plan_.dscp),
                                       "--timeout-ms", std::to_string(timeout_ns / 1'000'000)},
                                      owner, log);
    if (!pid) {
      r.error = pid.error().message;
      break;
    }
    pids.push_back(*pid);
    logs.push_back(log);
    shard.push_back(i);
  }
  // Every sender's exit, bounded by its own timeout (and a grace once the run has ended).
  int64_t stop_seen = 0;
  std::vector<int> status(pids.size(), -1);
  while (true) {
    bool running = false;
    for (size_t i = 0; i < pids.size(); ++i)
      if (status[i] < 0) {
        int st = 0;
        if (::waitpid(pids[i], &st, WNOHANG) == pids[i])
          status[i] = st;
        else
          running = true;
      }
    if (!running) break;
    const int64_t now = monotonic_ns();
    if (stopping_.load() && stop_seen == 0) stop_seen = now;
    if (now > r.start_ns + timeout_ns + 5'000'000'000 ||
        (stop_seen && now > stop_seen + kStopGraceNs)) {
      std::vector<int> left;
      for (size_t i = 0; i < pids.size(); ++i)
        if (status[i] < 0) left.push_back(pids[i]);
      terminate(left, 1000);
      r.error = stop_seen ? "unfinished when the run ended" : "timed out";
      break;
    }
    sleep_ms(5);
  }
  r.end_ns = monotonic_ns();
  r.seconds = (r.end_ns - r.start_ns) / 1e9;
  bool all_ok = r.error.empty() && !pids.empty();
  for (size_t i = 0; i < logs.size(); ++i) {
    nlohmann::json res;
    for (const auto& j : json_lines(logs[i]))
      if (j.value("mode", "") == "ckpt-send") res = j;
    if (res.is_null()) {
      all_ok = false;
      if (r.error.empty())
        r.error =
            "shard " + std::to_string(shard[i]) + " sender printed no result (see " + logs[i] + ")";
      continue;
    }
    r.shards.push_back({static_cast<int>(shard[i]), plan_.sources[shard[i]],
                        plan_.destinations[shard[i] % plan_.destinations.size()],
                        res.value("payload_bytes", uint64_t{0}), res.value("checksum", uint64_t{0}),
                        res.value("receiver_checksum", uint64_t{0}), res.value("ok", false)});
    r.full = res.value("full", false);
    r.payload += res.value("payload_bytes", uint64_t{0});
    r.wire += res.value("wire_bytes", uint64_t{0});
    if (!res.value("ok", false)) {
      all_ok = false;
      if (r.error.empty())
        r.error = fmt::format("shard {} checksum mismatch: sender {:016x}, receiver {:016x}",
                              shard[i], res.value("checksum", uint64_t{0}),
                              res.value("receiver_checksum", uint64_t{0}));
    }
  }
  r.ok = all_ok;
  if (plan_.wan_bps > 0 && r.seconds > 0)
    r.wan_utilisation = static_cast<double>(r.payload) * 8 / r.seconds / plan_.wan_bps;
  return r;
}

void CheckpointWorkload::stop(std::vector<std::string>* errors, bool keep_receivers) {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (!keep_receivers && !receivers_.empty()) {
    terminate(receivers_, 1000);
    receivers_.clear();
  }
  for (const auto& r : reps())
    if (!r.ok && r.error != "unfinished when the run ended")
      errors->push_back("checkpoint " + w_.name + " replication " + std::to_string(r.rep) + ": " +
                        (r.error.empty() ? "failed" : r.error));
}

nlohmann::json CheckpointWorkload::to_part() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : reps()) out.push_back(rep_to_json(r));
  return out;
}

void CheckpointWorkload::merge_part(const nlohmann::json& part, int64_t offset_ns) {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& j : part) {
    if (!j.is_object()) continue;
    CheckpointRep b = rep_from_json(j);
    b.due_ns -= offset_ns;
    b.start_ns -= offset_ns;
    b.end_ns -= offset_ns;
    auto it = std::ranges::find(reps_, b.rep, &CheckpointRep::rep);
    if (it == reps_.end()) {
      reps_.push_back(std::move(b));
      continue;
    }
    merge_rep(*it, b);
    if (plan_.wan_bps > 0 && it->seconds > 0)
      it->wan_utilisation = static_cast<double>(it->payload) * 8 / it->seconds / plan_.wan_bps;
  }
  std::ranges::sort(reps_, {}, &CheckpointRep::rep);
}

std::vector<CheckpointRep> CheckpointWorkload::reps() const {
  std::lock_guard<std::mutex> l(mu_);
  return reps_;
}

nlohmann::json CheckpointWorkload::to_json(
    const std::vector<metrics::Iteration>& iterations) const {
  nlohmann::json reps = nlohmann::json::array();
  const auto all = this->reps();
  nlohmann::json steps;  // null without a stepping workload
  if (!iterations.empty()) {
    const auto sp = split_steps(iterations, all);
    steps = {
        {"during", {{"steps", sp.during}, {"median_ms", sp.during_ms}}},
        {"outside", {{"steps", sp.outside}, {"median_ms", sp.outside_ms}}},
        {"measured",
         "the run's workload iterations (first start to last end over ranks, CLOCK_MONOTONIC); "
         "during: those that overlap a replication of this workload (started before its "
         "last sender exited, ended after its first started); outside: the others; medians"}};
  }
  for (const auto& r : all) reps.push_back(rep_to_json(r));
  return {{"workload", w_.name},
          {"from", w_.from},
          {"to", w_.to},
          {"mode", w_.mode},
          {"qos", w_.qos.empty() ? "none" : w_.qos},
          {"dscp", plan_.dscp},
          {"real_bytes", w_.bytes},
          {"emulated_bytes", plan_.emulated_bytes},
          {"shards", plan_.sources.size()},
          {"shard_bytes", plan_.shard_bytes},
          {"streams", w_.streams},
          {"every_s", w_.every_steps ? nlohmann::json() : nlohmann::json(w_.every.ns / 1e9)},
          {"every_steps", w_.every_steps},
          {"wan", plan_.wan},
          {"wan_bps", plan_.wan_bps},
          {"min_seconds", plan_.min_seconds},
          {"warning", plan_.warning},
          {"replications", reps},
          {"workload_steps", steps},
          {"measured",
           "CLOCK_MONOTONIC in run, first sender started to last sender exited; payload = block "
           "bytes the senders wrote; WAN utilisation = payload x 8 / seconds / the primary WAN "
           "link's emulated rate; checksums FNV-1a 64 of each whole shard at both ends"}};
}

}  // namespace tb::experiment
