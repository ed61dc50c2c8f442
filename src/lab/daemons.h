// Starting a lab's delay stages: one tb-delayd per namespace that has stage queues, each with a
// config file (stage/queue_spec.h format; rewritten and SIGHUP'd by `link set`) and a stats
// file, all under the lab's supervisor (runner/supervisor.h).
// Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "plan/plan.h"

namespace tb::lab {

// <lab dir>/stages/<netns>.conf and .stats.json
std::string stage_config_path(const std::string& lab, const std::string& netns);
std::string stage_stats_path(const std::string& lab, const std::string& netns);

// The tb-delayd next to this executable, else the one on PATH.
std::string delayd_path();

// Writes every stage's (and failover agent's) config and starts the supervisor; succeeds once
// all of them run. Neither: nothing to do.
// Routers (mode bfd): their FRR daemons too, and it waits until BGP has every route.
// Fabric agents (dual-ToR host-route withdrawal) too.
Status start_stages(const std::string& lab, const std::vector<plan::Stage>& stages,
                    const std::vector<plan::Agent>& agents = {},
                    const std::vector<plan::Router>& routers = {},
                    const std::vector<plan::FabricAgent>& fabric = {});

// Writes `stage`'s config (rename over the old one). A running stage re-reads it on SIGHUP.
Status write_stage_config(const std::string& lab, const plan::Stage& stage);

// After `stage` changed: a running stage is told to reload; a new one is added to the
// supervisor's spec and started (the supervisor itself too, when the lab had none). Returns
// once the stage serves every queue it was given (bounded, 3 s).
Status refresh_stage(const std::string& lab, const plan::Stage& stage);

}  // namespace tb::lab
