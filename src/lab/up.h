// The `up` use case: a scenario file in, a running lab out. Loads and validates the scenario,
// checks this host (capability::host_for_plan), compiles the whole plan (plan::compile: topology,
// shaping, delay stages, rxe devices, daemons), refuses an address space that overlaps the host's
// routes, and applies it (lab.h up: journaled, rolled back on failure or a signal).
// Every refusal is exit code 2 naming what to change; nothing is left behind on any error.
// Not thread-safe (signal handlers are process-wide).
#pragma once

#include <functional>
#include <string>

#include "core/error.h"
#include "lab/state.h"
#include "plan/plan.h"

namespace tb::lab {

struct UpOptions {
  std::string scenario_path;
  plan::PlanOptions plan;                                  // lab name, shaping and rdma as asked
  std::function<void(size_t, size_t)> progress = nullptr;  // (ops applied, ops in all)
};

struct UpReport {
  plan::Plan plan;     // what was built
  LabState state;      // as saved
  double seconds = 0;  // wall time of the apply
};

Result<UpReport> bring_up(const UpOptions& o);

// Load + validate + compile for `host` (all errors exit code 2): what `up` would build there.
// `plan`, `validate` and `graph` use it with the host they can see.
Result<plan::Plan> make_plan(const std::string& scenario_path, const plan::PlanOptions& o,
                             const plan::HostCaps& host);

// Exit code 2 "VERB needs root (...)" unless this process runs as root.
Status require_root(const std::string& verb);

}  // namespace tb::lab
