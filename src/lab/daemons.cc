#include "lab/daemons.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "congestion/episodes.h"
#include "core/clock.h"
#include "core/paths.h"
#include "core/process.h"
#include "core/realtime.h"
#include "failover/agent.h"
#include "failover/fabric.h"
#include "failover/frr.h"
#include "lab/state.h"
#include "runner/supervisor.h"
#include "stage/calibration.h"
#include "stage/netfilter_rules.h"
#include "stage/queue_spec.h"

namespace tb::lab {

std::string stage_config_path(const std::string& lab, const std::string& netns) {
  return lab::lab_dir(lab) + "/stages/" + netns + ".conf";
}
std::string stage_stats_path(const std::string& lab, const std::string& netns) {
  return lab::lab_dir(lab) + "/stages/" + netns + ".stats.json";
}

Result<std::string> delayd_path() {
  return find_companion("tb-delayd", "TESTBEDCTL_DELAYD");
}

namespace {

constexpr int kDaemonGraceMs = 3000;  // SIGTERM, then SIGKILL (runner/supervisor.h)
// How long `link set` waits for a stage to answer for its change: a stage between restarts may
// first wait out the supervisor's backoff (at most 2 s).
constexpr int kReloadWaitMs = 5000;

runner::ChildSpec stage_child(const std::string& lab, const plan::Stage& st,
                              const std::string& delayd) {
  // SIGHUP blocked across exec and running once ready: a reload sent while it starts waits for
  // it instead of killing it (runner/supervisor.h).
  // --probe-rule-installed: its release probe's rule came with the namespace's other rules
  // (apply/netlink_kernel_stage.cc; refresh_stage for a stage new to the lab), and stays.
  // In process (a fork of the supervisor running tb-delayd's main, no exec: runner/supervisor.h)
  // when the tb-delayd found is the one installed beside this testbedctl, the same build; one
  // named by $TESTBEDCTL_DELAYD or found on PATH is exec'd.
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const bool beside = !ec && std::filesystem::path(delayd) == self.parent_path() / "tb-delayd";
  std::vector<std::string> argv = {delayd,
                                   "--config",
                                   stage_config_path(lab, st.netns),
                                   "--stats",
                                   stage_stats_path(lab, st.netns),
                                   "--realtime",
                                   std::to_string(kRealtimePriority),
                                   "--probe-rule-installed"};
  // ECN: its marking queues read the congestion agent's probabilities there (stage/mark_table.h).
  if (!st.mark_table.empty()) {
    argv.push_back("--mark-table");
    argv.push_back(st.mark_table);
  }
  return {"stage " + st.node, st.netns, std::move(argv), 0, true, true, beside};
}

// The stage config in `netns` now on disk ("" when there is none).
std::string config_on_disk(const std::string& lab, const std::string& netns) {
  std::ifstream in(stage_config_path(lab, netns));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The pid of the stage of `node` when it runs or starts (0 otherwise), from the supervisor's
// status file. Starting too: SIGHUP stays blocked across its exec, so a signal waits for it.
int stage_pid(const std::string& dir, const std::string& node) {
  std::ifstream in(dir + "/supervisor.json");
  for (const auto& c : runner::states_from_json(nlohmann::json::parse(in, nullptr, false)))
    if (c.name == "stage " + node && (c.running || c.starting)) return c.pid;
  return 0;
}

// Waits (bounded) for the stage's answer for `generation` in its stats file.
std::optional<ReloadAnswer> await_answer(const std::string& lab, const std::string& netns,
                                         uint64_t generation) {
  const std::string stats_path = stage_stats_path(lab, netns);
  for (int i = 0; i < kReloadWaitMs / 10; ++i) {
    std::ifstream in(stats_path);
    auto answer = read_reload_answer(nlohmann::json::parse(in, nullptr, false), generation);
    if (answer.answered) return answer;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

}  // namespace

ReloadAnswer read_reload_answer(const nlohmann::json& stats, uint64_t generation) {
  if (!stats.is_object() || !stats.contains("generation")) return {};
  const uint64_t got = stats.value("generation", uint64_t{0});
  // Only this generation: a stats file left by an earlier stage process says nothing of it.
  if (got != generation) return {};
  return {true, stats.value("reload_error", "")};
}

Status write_stage_config(const std::string& lab, const plan::Stage& st, uint64_t generation) {
  std::vector<stage::QueueSpec> queues;
  for (const auto& q : st.queues) queues.push_back({q.queue, q.delay, q.jitter, q.maxlen, q.mark});
  auto dir = open_lab_dir(lab);
  if (!dir) return std::unexpected(dir.error());
  auto stages = dir->sub("stages");
  if (!stages) return std::unexpected(stages.error());
  return stages->write(st.netns + ".conf", stage::to_config(queues, generation));
}

Status check_socket_paths(const std::string& lab, const std::vector<plan::Daemon>& daemons) {
  for (const auto& d : daemons)
    if (const auto* r = std::get_if<plan::Router>(&d))
      for (const char* name : {"zserv.api", "zebra.vty", "bfdd.vty", "bgpd.vty"})
        TB_TRY(paths::check_socket_path(lab_dir(lab) + "/frr/" + r->netns + "/" + name,
                                        "lab \"" + lab + "\"'s router " + r->node));
  return {};
}

Status check_daemon_programs(const std::vector<plan::Daemon>& daemons) {
  bool stage = false, probe = false, routers = false;
  for (const auto& d : daemons) {
    stage = stage || std::holds_alternative<plan::Stage>(d);
    routers = routers || std::holds_alternative<plan::Router>(d);
    probe = probe || std::holds_alternative<plan::Agent>(d) ||
            std::holds_alternative<plan::FabricAgent>(d) ||
            std::holds_alternative<plan::CongestionAgent>(d);
  }
  if (stage) TB_TRY(delayd_path());
  if (probe) {
    auto found = find_companion("tb-probe", "TESTBEDCTL_PROBE");
    if (!found) return std::unexpected(found.error());
  }
  if (routers) TB_TRY(failover::frr_installed());
  return {};
}

Result<int> launch_early_supervisor(const std::string& lab) {
  auto lab_files = open_lab_dir(lab);
  if (!lab_files) return std::unexpected(lab_files.error());
  return runner::launch_supervisor(lab, lab_files->path(), plan::owner_marker(lab), {});
}

Status start_daemons(const std::string& lab, const std::vector<plan::Daemon>& daemons,
                     int early_supervisor, bool stages_configured) {
  if (daemons.empty()) return {};
  auto lab_files = open_lab_dir(lab);
  if (!lab_files) return std::unexpected(lab_files.error());
  auto stages = lab_files->sub("stages");
  if (!stages) return std::unexpected(stages.error());
  const std::string dir = lab_files->path();
  std::vector<runner::ChildSpec> specs;
  std::optional<std::string> tb_probe;
  // A tb-probe daemon: its JSON config under stages/, the lab's events.jsonl.
  auto probe_child = [&](const std::string& name, const std::string& netns, const char* mode,
                         const std::string& conf_name, const nlohmann::json& config) -> Status {
    if (!tb_probe) {
      auto found = find_companion("tb-probe", "TESTBEDCTL_PROBE");
      if (!found) return std::unexpected(found.error());
      tb_probe = *found;
    }
    TB_TRY(stages->write(conf_name, config.dump(1) + "\n"));
    const std::string conf = stages->path() + "/" + conf_name;
    specs.push_back(
        {name, netns, {*tb_probe, mode, "--config", conf, "--events", dir + "/events.jsonl"}});
    return {};
  };
  std::optional<std::string> delayd;
  bool routers = false;
  std::vector<plan::Router> bgp;
  for (const auto& d : daemons) {
    if (const auto* st = std::get_if<plan::Stage>(&d)) {
      if (!delayd) {
        auto found = delayd_path();
        if (!found) return std::unexpected(found.error());
        delayd = *found;
      }
      if (!stages_configured) TB_TRY(write_stage_config(lab, *st));
      specs.push_back(stage_child(lab, *st, *delayd));
    } else if (const auto* a = std::get_if<plan::Agent>(&d)) {
      failover::AgentConfig c{a->node, a->port, a->interval_ns, a->misses, {}};
      for (const auto& p : a->paths) {
        failover::AgentPath ap{p.name, p.dev, p.peer.to_string(), {}, p.metric};
        for (const auto& dst : p.dsts) ap.dsts.push_back(dst.to_string());
        c.paths.push_back(ap);
      }
      TB_TRY(probe_child("agent " + a->node, a->netns, "agent", "agent-" + a->netns + ".json",
                         failover::to_json(c)));
    } else if (const auto* f = std::get_if<plan::FabricAgent>(&d)) {
      failover::FabricConfig c{f->region, f->spine_nodes, f->spine_netns, {}, {}};
      for (const auto& t : f->tors) c.tors.push_back({t.node, t.netns, t.spine_port, t.addr});
      for (const auto& g : f->gpus) {
        failover::FabricConfig::Gpu gpu{g.node, g.addr, {}};
        for (const auto& p : g.ports) gpu.ports.push_back({p.tor, p.port});
        c.gpus.push_back(std::move(gpu));
      }
      TB_TRY(probe_child("fabric " + f->region, f->netns, "fabric", "fabric-" + f->region + ".json",
                         failover::to_json(c)));
    } else if (const auto* c = std::get_if<plan::CongestionAgent>(&d)) {
      // Its stats go beside the config: stages/congestion.stats.json (congestion/stats.h).
      TB_TRY(probe_child("congestion " + lab, c->netns, "congestion", "congestion.json",
                         plan::to_json(*c)));
      // Its pause episodes in the lab's directory (congestion/episodes.h); `run` copies its own.
      auto& argv = specs.back().argv;
      argv.insert(argv.end(), {"--episodes", dir + "/" + congestion::kEpisodesFile});
      // It re-reads its control document (congestion/control.h) on SIGHUP, which stays blocked
      // across its exec until its handler is in place.
      specs.back().hup_blocked = true;
    } else if (const auto* r = std::get_if<plan::Router>(&d)) {
      auto kids = failover::frr_children(*lab_files, *r);
      if (!kids) return std::unexpected(kids.error());
      specs.insert(specs.end(), kids->begin(), kids->end());
      bgp.push_back(*r);
      routers = true;
    }
  }
  if (early_supervisor > 0)
    TB_TRY(runner::give_children(early_supervisor, lab, dir, plan::owner_marker(lab), specs));
  else
    TB_TRY(runner::start_supervisor(lab, dir, plan::owner_marker(lab), specs));
  if (routers) TB_TRY(failover::wait_for_bgp(bgp, 30000));
  return {};
}

void stop_daemons(const std::string& lab) {
  await_daemons(signal_daemons(lab));
}

StoppingDaemons signal_daemons(const std::string& lab) {
  StoppingDaemons s;
  s.pids = owned_processes(plan::owner_marker(lab), lab.empty());
  s.sent_ns = send_terminate(s.pids);
  return s;
}

void await_daemons(const StoppingDaemons& stopping) {
  await_terminated(stopping.pids, stopping.sent_ns, kDaemonGraceMs);
}

LabKernel::LabKernel(std::string lab, apply::Kernel& inner, bool daemons_ahead,
                     std::vector<plan::Stage> early_stages)
    : lab_(std::move(lab)),
      inner_(inner),
      daemons_ahead_(daemons_ahead),
      early_stages_(daemons_ahead ? std::move(early_stages) : std::vector<plan::Stage>{}) {
  for (const auto& st : early_stages_) awaited_netns_.insert(st.netns);
}

Status LabKernel::submit(const plan::Op& op) {
  if (std::exchange(daemons_ahead_, false)) {
    // Not journaled itself: until it has its children, a rollback or our end stops it, and
    // `down`/`clean` find it by the owner marker it carries.
    auto pid = launch_early_supervisor(lab_);
    if (!pid) return std::unexpected(pid.error());
    early_supervisor_ = *pid;
  }
  if (const auto* d = std::get_if<plan::StartDaemon>(&op)) {
    pending_.push_back(d->daemon);
    return {};
  }
  TB_TRY(inner_.submit(op));
  if (const auto* n = std::get_if<plan::CreateNetns>(&op)) awaited_netns_.erase(n->netns);
  return offer_stages();
}

Status LabKernel::offer_stages() {
  if (early_stages_.empty() || stages_offered_ || !awaited_netns_.empty() || early_supervisor_ <= 0)
    return {};
  // The supervisor is an exec of testbedctl (~25 ms on a quiet host): until it is ready, asked
  // again every 5 ms of the build, not at every op.
  const int64_t now = monotonic_ns();
  if (now < next_offer_ns_) return {};
  next_offer_ns_ = now + 5'000'000;
  if (!probes_added_) {
    std::vector<std::string> netns;
    for (const auto& st : early_stages_) netns.push_back(st.netns);
    auto added = inner_.add_probe_rules(netns);
    if (!added) return std::unexpected(added.error());
    if (!*added) {  // this kernel cannot: they start at sync, as the other daemons
      early_stages_.clear();
      return {};
    }
    probes_added_ = true;
  }
  if (!configs_written_) {
    for (const auto& st : early_stages_) TB_TRY(write_stage_config(lab_, st));
    configs_written_ = true;
  }
  auto delayd = delayd_path();
  if (!delayd) return std::unexpected(delayd.error());
  std::vector<runner::ChildSpec> specs;
  for (const auto& st : early_stages_) specs.push_back(stage_child(lab_, st, *delayd));
  // Not ready for SIGHUP yet (it has not written its pid): false, asked again later.
  auto offered = runner::offer_children(early_supervisor_, lab_dir(lab_), specs);
  if (!offered) return std::unexpected(offered.error());
  stages_offered_ = *offered;
  return {};
}

Status LabKernel::sync() {
  TB_TRY(inner_.sync());
  auto daemons = std::move(pending_);
  pending_.clear();
  if (daemons.empty()) return {};
  // Handed over (or failed, then the rollback's stop_daemons finds it by its marker). Stages
  // offered early are in the specs again: the supervisor starts only the rest, and the wait is
  // for all of them.
  return start_daemons(lab_, daemons, std::exchange(early_supervisor_, 0), configs_written_);
}

void LabKernel::stop_early_supervisor() {
  if (const int pid = std::exchange(early_supervisor_, 0); pid > 0)
    terminate({pid}, kDaemonGraceMs);
}

Status LabKernel::undo(const plan::Op& op) {
  if (!std::holds_alternative<plan::StartDaemon>(op)) return inner_.undo(op);
  if (!stopped_) stop_daemons(lab_);
  stopped_ = true;
  return {};
}

Status refresh_stage(const std::string& lab, const plan::Stage& st) {
  auto lab_files = open_lab_dir(lab);
  if (!lab_files) return std::unexpected(lab_files.error());
  const std::string dir = lab_files->path();
  // This change's number: the stage answers for it in its stats file (stage/stage.h).
  const std::string before = config_on_disk(lab, st.netns);
  const uint64_t generation = stage::config_generation(before) + 1;
  TB_TRY(write_stage_config(lab, st, generation));
  if (const int pid = stage_pid(dir, st.node); pid > 0) {
    if (::kill(pid, SIGHUP) != 0) return sys_fail("reload the delay stage of " + st.node);
  } else {
    // Not running: a stage new to the lab joins the supervisor's spec; one given up on (broken)
    // or between restarts is already in it. Either way a reload of the supervisor starts it
    // (and revives it when broken), and it reads this generation as it starts.
    std::ifstream spec_in(dir + "/supervisor-spec.json");
    auto j = nlohmann::json::parse(spec_in, nullptr, false);
    auto specs =
        j.is_discarded() ? Result<std::vector<runner::ChildSpec>>{} : runner::specs_from_json(j);
    if (!specs) return std::unexpected(specs.error());
    const std::string name = "stage " + st.node;
    if (std::ranges::none_of(*specs, [&](const runner::ChildSpec& c) { return c.name == name; })) {
      auto delayd = delayd_path();
      if (!delayd) return std::unexpected(delayd.error());
      // It runs with --probe-rule-installed: the rule `up` puts in a stage's namespace.
      TB_TRY(stage::add_probe_rule(st.netns, stage::kProbeQueue, stage::kProbeMark,
                                   stage::kProbeMarker));
      specs->push_back(stage_child(lab, st, *delayd));
    }
    int sup = 0;
    std::ifstream(dir + "/supervisor.pid") >> sup;
    if (sup > 0 && ::kill(sup, 0) == 0) {
      TB_TRY(
          lab_files->write("supervisor-spec.json", runner::specs_to_json(*specs).dump(1) + "\n"));
      if (::kill(sup, SIGHUP) != 0) return sys_fail("reload the lab supervisor");
    } else {
      TB_TRY(runner::start_supervisor(lab, dir, plan::owner_marker(lab), *specs));
    }
  }
  // Confirmed: the stage's own answer for this generation, not the look of its stats file.
  const auto answer = await_answer(lab, st.netns, generation);
  if (!answer)
    return fail("the delay stage of " + st.node + " did not confirm the change within " +
                std::to_string(kReloadWaitMs / 1000) + " s (see " + dir + "/logs)");
  if (answer->error.empty()) return {};
  // Refused: the config goes back to what it was (the lab's state keeps the old figures too),
  // so a later restart of the stage does not trip over the refused queues and leave every link
  // through it dead (fail-closed).
  std::string restored = "; its previous config could not be read back";
  if (auto old = stage::parse_queue_config(before)) {
    auto stages = lab_files->sub("stages");
    if (stages && stages->write(st.netns + ".conf", stage::to_config(*old, generation + 1))) {
      if (const int pid = stage_pid(dir, st.node); pid > 0) ::kill(pid, SIGHUP);
      const auto again = await_answer(lab, st.netns, generation + 1);
      restored = again && again->error.empty() ? "; the stage's previous queues are back"
                                               : "; the previous config is written back";
    }
  }
  return fail("the delay stage of " + st.node + " refused the change: " + answer->error + restored);
}

}  // namespace tb::lab
