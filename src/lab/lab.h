// Lab lifecycle: up (journaled apply with rollback), down (journal replay plus a marker sweep),
// clean (marker sweep alone, for when state is lost). Each takes the lab lock.
// Thread-safety: one call at a time per process (signal handlers are process-wide).
#pragma once

#include <functional>
#include <string>

#include "apply/kernel.h"
#include "lab/state.h"
#include "plan/plan.h"

namespace tb::lab {

// Soft-RoCE on the rail: whether `up` makes rxe devices (apply/rxe.h), and why (the doctor's
// rxe verdict, or the user's --rdma none), kept in the lab's state for `status` and reports.
struct RdmaChoice {
  bool make = false;
  std::string why;
};

struct UpResult {
  LabState state;
  double seconds = 0;  // wall time of the apply
};

// Builds the lab. Refuses (exit code 2) when the lab is already up or left over, or when the
// address space overlaps a route of the calling namespace. SIGINT/SIGTERM during the apply
// roll everything back.
// Once every op is in place the rxe devices are made (when `rdma.make`), then `after_apply` runs
// (starting the lab's processes); either failing rolls everything back like any other failure.
Result<UpResult> up(const plan::Plan& plan, const std::string& scenario_path, apply::Kernel& kernel,
                    const std::function<Status()>& after_apply = {}, const RdmaChoice& rdma = {});

// Removes everything the lab made; succeeds when it is already gone.
Status down(const std::string& lab, apply::Kernel& kernel);

// Removes every namespace and hosts file carrying the lab's owner marker (all labs when
// `lab` is empty), and their state. Returns how many namespaces went.
Result<int> clean(const std::string& lab, apply::Kernel& kernel);

// Routes of the calling namespace's main table (from /proc/net/route) overlapping `space`.
std::vector<std::string> overlapping_host_routes(const Prefix& space);

}  // namespace tb::lab
