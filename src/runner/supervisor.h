// Supervisor: keeps a lab's long-running helper processes (delay stages today; routing daemons
// and probes later) alive. Runs as `testbedctl supervise LAB`, a daemon `up` starts and `down`
// stops. Each child is started inside its node's namespace, restarted with backoff when it
// dies, and given up on (reported broken) after too many deaths in a row. Every start, death
// and restart is an event on the lab's monotonic timeline; the current state is rewritten
// atomically to a status file that `status` reads.
//
// Ownership: children carry TESTBEDCTL_OWNER=<owner marker> in their environment, so `clean`
// can find them by marker when the supervisor itself is gone. Not thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "core/process.h"

namespace tb::runner {

struct ChildSpec {
  std::string name;   // e.g. "stage hz/tr"
  std::string netns;  // namespace to run in
  std::vector<std::string> argv;
  int delay_ms = 0;  // first start this long after the supervisor's (FRR: zebra before the rest)
};

struct ChildState {
  std::string name;
  int pid = 0;
  bool running = false;
  bool broken = false;  // gave up after too many deaths in a row
  int restarts = 0;
  std::string last_exit;  // "exit 1", "signal 9", ""
};

nlohmann::json specs_to_json(const std::vector<ChildSpec>& specs);
Result<std::vector<ChildSpec>> specs_from_json(const nlohmann::json& j);
nlohmann::json states_to_json(const std::vector<ChildState>& states);
std::vector<ChildState> states_from_json(const nlohmann::json& j);

// Starts argv inside `netns` without waiting (fork, setns, exec), with `owner` in its
// environment and stdout/stderr appended to `log_path`. Returns the pid.
Result<int> spawn_in_netns(const std::string& netns, const std::vector<std::string>& argv,
                           const std::string& owner, const std::string& log_path);

// "exit 1", "signal Killed" for a wait status.
std::string describe_exit(int status);

struct SupervisorPaths {
  std::string status;  // JSON array of ChildState, rewritten atomically
  std::string events;  // JSON lines, appended
  std::string logs;    // directory for one <child>.log each
};

// Runs until `stop` is set (from a signal handler): starts every child, restarts the dead
// (backoff 50 ms doubling to 2 s; broken after 8 deaths within a minute), and on stop sends
// SIGTERM, waits up to 2 s, then SIGKILL. Returns after every child has been reaped.
// When `reload` is set (SIGHUP), `more()` is asked for the specs again and children it names
// that are not running yet are started (the lab grows a stage when `link set` adds a delay).
Status supervise(const std::vector<ChildSpec>& specs, const std::string& owner,
                 const SupervisorPaths& paths, const std::atomic<bool>& stop,
                 std::atomic<bool>* reload = nullptr,
                 const std::function<std::vector<ChildSpec>()>& more = {});

// Starts `testbedctl supervise LAB` as a daemon (new session, its own log), with the owner
// marker in its environment, and waits for every child in `specs` to run: up to `wait_ms` past
// the latest child's start delay (ChildSpec::delay_ms).
Status start_supervisor(const std::string& lab, const std::string& lab_dir,
                        const std::string& owner, const std::vector<ChildSpec>& specs,
                        int wait_ms = 3000);

}  // namespace tb::runner
