// Running a lab's daemons (plan/daemon.h) under its supervisor (runner/supervisor.h): one
// tb-delayd per namespace that has stage queues, each with a config file (stage/queue_spec.h
// format; rewritten and SIGHUP'd by `link set`) and a stats file; `tb-probe agent` and
// `tb-probe fabric` with their JSON configs; FRR's zebra, bfdd and bgpd per router.
//
// LabKernel is how they are applied and undone like every other op: a Kernel (apply/kernel.h)
// that passes kernel objects to the netlink kernel and starts the StartDaemon ops it was given
// once every kernel object is in place (sync); undoing one stops the lab's supervisor and every
// process that carries the lab's owner marker.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <unordered_set>
#include <vector>

#include "apply/kernel.h"
#include "core/error.h"
#include "plan/plan.h"

namespace tb::lab {

// <lab dir>/stages/<netns>.conf and .stats.json
std::string stage_config_path(const std::string& lab, const std::string& netns);
std::string stage_stats_path(const std::string& lab, const std::string& netns);

// The tb-delayd next to this executable, else at $TESTBEDCTL_DELAYD, else on PATH (as every
// companion program is found: core/process.h find_companion); exit 2 when there is none.
Result<std::string> delayd_path();

// Every program the daemons need is installed (tb-delayd, tb-probe, FRR's zebra/bgpd/bfdd), so
// `up` can refuse before it builds anything: exit 2 naming the first one missing and where it
// was looked for. No daemons: nothing to check.
Status check_daemon_programs(const std::vector<plan::Daemon>& daemons);
// Every Unix socket the lab's daemons will bind (FRR's zserv.api and vty sockets under
// <lab dir>/frr/<netns>/) fits sun_path: exit 2 naming the path (core/paths.h).
Status check_socket_paths(const std::string& lab, const std::vector<plan::Daemon>& daemons);

// Writes every daemon's config and starts the supervisor; succeeds once all of them run (with
// routers, once BGP has every route). None: nothing to do. `early_supervisor` (a pid from
// launch_early_supervisor): that supervisor, started with no children, is handed them
// (runner/supervisor.h give_children) instead of a new one being started.
// `stages_configured`: every stage's config is written already (LabKernel handed them over
// early), so they are not written again.
Status start_daemons(const std::string& lab, const std::vector<plan::Daemon>& daemons,
                     int early_supervisor = 0, bool stages_configured = false);
// The lab's supervisor with no children yet, started before `up` builds anything so its start
// overlaps the build (runner/supervisor.h give_children). Returns its pid.
Result<int> launch_early_supervisor(const std::string& lab);

// Stops the lab's supervisor and every process carrying the lab's owner marker (SIGTERM, then
// SIGKILL after a grace period); every lab's when `lab` is empty. Nothing running: nothing to do.
void stop_daemons(const std::string& lab);
// stop_daemons in two halves, so `down` removes namespaces while the processes exit: SIGTERM
// to every one now ...
struct StoppingDaemons {
  std::vector<int> pids;
  int64_t sent_ns = 0;
};
StoppingDaemons signal_daemons(const std::string& lab);
// ... and then the wait (the grace period counts from the signal), SIGKILL for any left.
void await_daemons(const StoppingDaemons& stopping);

// With `daemons_ahead` (the plan has StartDaemon ops), the lab's supervisor is launched with no
// children at the first op, and handed them at sync; a rollback (prepare_undo) or destruction
// before that stops it.
class LabKernel : public apply::Kernel {
 public:
  // `early_stages`: the plan's delay stages, handed to the early supervisor as soon as every
  // namespace they run in exists (all the namespace ops come first), so that their start and
  // calibration overlap the rest of the build instead of following it; their release-probe
  // rules go in first (Kernel::add_probe_rules). A kernel that cannot, or a supervisor not yet
  // ready before sync: they start at sync with the other daemons, as without them.
  LabKernel(std::string lab, apply::Kernel& inner, bool daemons_ahead = false,
            std::vector<plan::Stage> early_stages = {});
  ~LabKernel() override { stop_early_supervisor(); }
  LabKernel(const LabKernel&) = delete;
  LabKernel& operator=(const LabKernel&) = delete;

  Status submit(const plan::Op& op) override;
  Status sync() override;
  Status undo(const plan::Op& op) override;
  void prepare_undo(const std::vector<plan::Op>& ops) override {
    stop_early_supervisor();
    inner_.prepare_undo(ops);
  }
  Status set_link_up(const std::string& netns, const std::string& ifname, bool up) override {
    return inner_.set_link_up(netns, ifname, up);
  }
  Result<int64_t> set_links_up(const std::vector<apply::IfaceRef>& ends, int wait_ms,
                               int64_t* first_up_ns) override {
    return inner_.set_links_up(ends, wait_ms, first_up_ns);
  }
  Result<std::vector<std::string>> owned_netns(const std::string& marker,
                                               const std::string& name_prefix = "") override {
    return inner_.owned_netns(marker, name_prefix);
  }
  Result<std::vector<apply::IfaceInfo>> interfaces(const std::string& netns) override {
    return inner_.interfaces(netns);
  }

 private:
  // The early supervisor, while it has not been handed its children: stopped and reaped.
  void stop_early_supervisor();
  // Hands early_stages_ to the early supervisor once their namespaces exist and it is ready.
  Status offer_stages();

  std::string lab_;
  apply::Kernel& inner_;
  std::vector<plan::Daemon> pending_;  // submitted, started at sync()
  bool stopped_ = false;               // undo stops them all at once
  bool daemons_ahead_ = false;         // launch the supervisor at the first op
  int early_supervisor_ = 0;           // its pid until it is handed its children
  std::vector<plan::Stage> early_stages_;
  std::unordered_set<std::string> awaited_netns_;  // theirs, not created yet
  bool probes_added_ = false;                      // their release-probe rules are in
  bool configs_written_ = false;                   // their stages/<netns>.conf
  bool stages_offered_ = false;                    // the supervisor has them
  int64_t next_offer_ns_ = 0;                      // not ready: ask again from then
};

// Writes `stage`'s config (rename over the old one), numbered `generation` when not 0
// (stage/queue_spec.h). A running stage re-reads it on SIGHUP.
Status write_stage_config(const std::string& lab, const plan::Stage& stage,
                          uint64_t generation = 0);

// What a stage's stats file says of config generation `generation`: answered once the stage
// has read that very generation; `error` is the stage's reason when it refused it, in part or
// whole. Pure.
struct ReloadAnswer {
  bool answered = false;
  std::string error;
};
ReloadAnswer read_reload_answer(const nlohmann::json& stats, uint64_t generation);

// After `stage` changed: writes its config as the next generation; a running (or starting)
// stage is told to reload; one not running (new to the lab, between restarts, or given up on as
// broken) is started by a reload of the supervisor, which adds it to the spec or revives it
// (the supervisor itself is started when the lab had none). Returns once the stage has answered
// for this generation: its refusal is an error carrying its reason (and the config is written
// back as it was, as the next generation, so a restart does not trip over the refused queues);
// no answer within 5 s is an error too.
Status refresh_stage(const std::string& lab, const plan::Stage& stage);

}  // namespace tb::lab
