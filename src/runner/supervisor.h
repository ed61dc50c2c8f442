// Supervisor: keeps a lab's long-running helper processes (delay stages today; routing daemons
// and probes later) alive. Runs as `testbedctl supervise LAB`, a daemon `up` starts and `down`
// stops. Each child is started inside its node's namespace, restarted with backoff when it
// dies, and given up on (reported broken) after too many deaths in a row; a reload (SIGHUP of
// `testbedctl supervise`, sent by `link set`/`link reset`) revives a broken child. Every start,
// death and restart is an event on the lab's monotonic timeline; the current state is rewritten
// atomically to a status file that `status` reads.
//
// A child that reloads on SIGHUP (a delay stage) gets SIGHUP blocked across its exec, so a
// reload sent while it starts waits for it (pending) instead of killing it; one that says when
// it is ready (kReadyFdEnv) counts as running from then on, not from its exec.
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
#include "core/unique_fd.h"

namespace tb::runner {

struct ChildSpec {
  std::string name;   // e.g. "stage hz/tr"
  std::string netns;  // namespace to run in
  std::vector<std::string> argv;
  int delay_ms = 0;  // first start this long after the supervisor's (FRR: zebra before the rest)
  // SIGHUP stays blocked across exec: the program takes it from a signalfd (tb-delayd).
  bool hup_blocked = false;
  // The program writes a byte to the fd named by kReadyFdEnv once it serves (tb-delayd: its
  // queues bound, its first stats written); until then the child is "starting", not running.
  bool notify_ready = false;
  // Started by a fork of the supervisor that runs argv through supervise's `in_process`
  // (tb-delayd's main, linked into testbedctl: stage/main/delayd_main.h), not by an exec of
  // argv[0]: no exec or dynamic load per stage (issue 34). The child is the same as an exec'd
  // one to everything else: its own process in its namespace, its log, the owner marker in its
  // environment (the supervisor's), SIGHUP blocked as asked, its name (comm) argv[0]'s; only
  // its /proc/PID/cmdline is the supervisor's. Without an `in_process` runner it is exec'd.
  bool in_process = false;
};

// Environment variable naming the fd a notify_ready child writes one byte to when ready, then
// closes (tb-delayd's main does; an fd it does not write to before exiting reads as EOF).
inline constexpr const char* kReadyFdEnv = "TESTBEDCTL_READY_FD";

struct ChildState {
  std::string name;
  int pid = 0;
  bool running = false;
  bool starting = false;  // spawned (pid set), not ready yet (ChildSpec::notify_ready)
  bool broken = false;    // gave up after too many deaths in a row (until a reload)
  int restarts = 0;
  std::string last_exit;  // "exit 1", "signal 9", ""
};

nlohmann::json specs_to_json(const std::vector<ChildSpec>& specs);
Result<std::vector<ChildSpec>> specs_from_json(const nlohmann::json& j);
nlohmann::json states_to_json(const std::vector<ChildState>& states);
std::vector<ChildState> states_from_json(const nlohmann::json& j);

// Starts argv inside `netns` without waiting for it to be ready (fork, setns, exec; returns once
// it has exec'd), with `owner` in its environment and stdout/stderr appended to `log_path`.
// Returns the pid. `hup_blocked`: SIGHUP blocked across the exec (else no signal is blocked).
// `ready`, when given, gets the read end of a pipe whose write end the child has at
// $TESTBEDCTL_READY_FD (non-blocking; EOF without a byte: it exited before it was ready).
Result<int> spawn_in_netns(const std::string& netns, const std::vector<std::string>& argv,
                           const std::string& owner, const std::string& log_path,
                           bool hup_blocked = false, UniqueFd* ready = nullptr);

// "exit 1", "signal Killed" for a wait status.
std::string describe_exit(int status);

struct SupervisorPaths {
  std::string status;  // JSON array of ChildState, rewritten atomically
  std::string events;  // JSON lines, appended
  std::string logs;    // directory for one <child>.log each
};

// Runs until `stop` is set (from a signal handler): starts every child, restarts the dead
// (backoff 50 ms doubling to 2 s, back to 50 ms once a child has run 10 s; broken after 8
// deaths within a minute), and on stop sends SIGTERM, waits up to 2 s, then SIGKILL. Returns
// after every child has been reaped. When `reload` is set (SIGHUP), broken children are given a
// fresh start (deaths and backoff forgotten), and `more()` is asked for the specs again and
// children it names that are not running yet are started, each `delay_ms` after the reload
// (the lab grows a stage when `link set` adds a delay; `up` hands an early supervisor all of
// its children). Stop and reload signals are blocked but in the wait between turns (ppoll), so
// either ends that wait at once.
// `in_process` runs an in_process child's argv in the forked child and returns its exit code
// (ready_fd: where it writes its ready byte; -1 when the child does not notify).
using InProcessMain = std::function<int(const std::vector<std::string>& argv, int ready_fd)>;
Status supervise(const std::vector<ChildSpec>& specs, const std::string& owner,
                 const SupervisorPaths& paths, const std::atomic<bool>& stop,
                 std::atomic<bool>* reload = nullptr,
                 const std::function<std::vector<ChildSpec>()>& more = {},
                 const InProcessMain& in_process = {});

// Forks (no exec) a child that enters `netns`, takes its output to `log_path` and runs
// `main(argv, ready_fd)`, exiting with its code. Only from a single-threaded process (the
// supervisor). `ready` as for spawn_in_netns; the child's other fds are closed.
Result<int> fork_in_netns(const std::string& netns, const std::vector<std::string>& argv,
                          const std::string& log_path, bool hup_blocked, UniqueFd* ready,
                          const InProcessMain& main);

// Starts `testbedctl supervise LAB` as a daemon (new session, its own log), with the owner
// marker in its environment, and waits for every child in `specs` to run: up to `wait_ms` past
// the latest child's start delay (ChildSpec::delay_ms), plus 20 ms per child (they start one
// after another). launch_supervisor and await_children are its two halves.
Status start_supervisor(const std::string& lab, const std::string& lab_dir,
                        const std::string& owner, const std::vector<ChildSpec>& specs,
                        int wait_ms = 3000);
// Writes `specs` as the supervisor's spec and starts it without waiting; returns its pid (our
// child until we exit).
Result<int> launch_supervisor(const std::string& lab, const std::string& lab_dir,
                              const std::string& owner, const std::vector<ChildSpec>& specs);
// Waits until the status file shows every child of `specs` running (start_supervisor's wait).
Status await_children(const std::string& lab_dir, const std::vector<ChildSpec>& specs,
                      int wait_ms = 3000);
// A supervisor launched early with no children (`up` launches it before it builds anything,
// so the supervisor's own start — an exec of testbedctl, ~25 ms of CPU on the reference VM —
// overlaps the kernel work instead of following it; issue 34) is handed `specs` once they can
// run: it is waited for until it takes SIGHUP (it has written supervisor.pid), its spec is
// rewritten and it is sent SIGHUP, which starts them (supervise's `more`), then as
// start_supervisor. One that has ended meanwhile is replaced by start_supervisor.
Status give_children(int pid, const std::string& lab, const std::string& lab_dir,
                     const std::string& owner, const std::vector<ChildSpec>& specs,
                     int wait_ms = 3000);
// give_children's first half, for a caller that goes on with other work while they start
// (`up` hands the delay stages over once their namespaces exist, and builds the rest of the lab
// meanwhile: issue 34): when the early supervisor `pid` is ready for SIGHUP now (it has written
// its pid), rewrites its spec as `specs` and signals it, without waiting for them to run, and
// returns true. Not ready yet: false, nothing done (ask again later). A later give_children
// with these specs and more starts only the new ones and waits for all (supervise's `more`
// starts only names it does not have).
Result<bool> offer_children(int pid, const std::string& lab_dir,
                            const std::vector<ChildSpec>& specs);

}  // namespace tb::runner
