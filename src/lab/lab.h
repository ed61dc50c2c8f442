// Lab lifecycle: up (journaled apply with rollback), down (journal replay plus a marker sweep),
// clean (marker sweep alone, for when state is lost). Each takes the lab lock.
// Thread-safety: one call at a time per process (signal handlers are process-wide).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "apply/kernel.h"
#include "lab/state.h"
#include "plan/plan.h"

namespace tb::lab {

struct UpResult {
  LabState state;
  double seconds = 0;  // wall time of the apply
};

// Applies the whole plan (lab/up.h bring_up makes it): kernel objects through `kernel`, the
// daemons through a LabKernel around it (lab/daemons.h), all journaled. Refuses (exit code 2)
// when the lab is already up, being built, or left over. SIGINT/SIGTERM during the apply, or
// any failure, roll everything back.
// `progress`, when given, hears (ops applied, ops in all) as the apply goes.
Result<UpResult> up(const plan::Plan& plan, const std::string& scenario_path, apply::Kernel& kernel,
                    const std::function<void(size_t, size_t)>& progress = nullptr);

// Removes everything the lab made; succeeds when it is already gone.
Status down(const std::string& lab, apply::Kernel& kernel);

// Removes every namespace and hosts file carrying the lab's owner marker (all labs when
// `lab` is empty), and their state. Returns how many namespaces went.
Result<int> clean(const std::string& lab, apply::Kernel& kernel);

// Routes of the calling namespace's main table (from /proc/net/route) overlapping `space`.
std::vector<std::string> overlapping_host_routes(const Prefix& space);

}  // namespace tb::lab
