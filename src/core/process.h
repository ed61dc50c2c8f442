// Processes the lab owns: each carries TESTBEDCTL_OWNER=<owner marker> in its environment, so
// they are found by marker (never by name or pattern) and stopped by pid.
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace tb {

inline constexpr const char* kOwnerEnv = "TESTBEDCTL_OWNER";

// Pids of processes whose environment holds TESTBEDCTL_OWNER=<owner> exactly, or, with
// `prefix`, any value starting with <owner> (reads /proc/<pid>/environ; root sees all).
std::vector<int> owned_processes(const std::string& owner, bool prefix = false);

// SIGTERM, wait up to `grace_ms`, then SIGKILL; reaps those that are our children.
void terminate(const std::vector<int>& pids, int grace_ms);
// terminate() in two halves, for a caller with other work to do while they exit: SIGTERM
// now (returns when it was sent, CLOCK_MONOTONIC ns) ...
int64_t send_terminate(const std::vector<int>& pids);
// ... and later: waits until `grace_ms` after `sent_ns` for them to go, then SIGKILL; reaps
// those that are our children. Returns once none of them runs.
void await_terminated(const std::vector<int>& pids, int64_t sent_ns, int grace_ms);

// A program installed with testbedctl ("tb-probe", "tb-rank"): next to the running
// executable, else at $<env_var>, else on PATH. Absolute path, or an exit-2 error.
Result<std::string> find_companion(const std::string& name, const char* env_var);

}  // namespace tb
