// Starting a lab's delay stages: one tb-delayd per namespace that has stage queues, each with a
// config file (stage/queue_spec.h format; rewritten and SIGHUP'd by `link set`) and a stats
// file, all under the lab's supervisor (runner/supervisor.h).
// Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "plan/plan.h"

namespace tb::runner {

// <lab dir>/stages/<netns>.conf and .stats.json
std::string stage_config_path(const std::string& lab, const std::string& netns);
std::string stage_stats_path(const std::string& lab, const std::string& netns);

// The tb-delayd next to this executable, else the one on PATH.
std::string delayd_path();

// Writes every stage's config and starts the supervisor; succeeds once all stages run.
// No stages: nothing to do.
Status start_stages(const std::string& lab, const std::vector<plan::Stage>& stages);

}  // namespace tb::runner
