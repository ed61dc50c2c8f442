// Where testbedctl keeps its files and named namespaces, per mode (docs/design-rootless.md §0).
//
// Root (euid 0 outside any keeper) keeps today's places exactly: the runtime root
// /run/testbedctl (locks, stages, events, stats, a lab's directory; tmpfs, gone at reboot), the
// state root /var/lib/testbedctl (results/, exercises/), named namespaces under /run/netns and
// their hosts files under /etc/netns (iproute2's places).
//
// Rootless (any other euid, or a process that joined the user's keeper: core/userns.h) keeps
// them in the user's own directories: the runtime root $XDG_RUNTIME_DIR/testbedctl (the keeper
// mounts a private tmpfs there, so a lab's state dies with its namespaces), the state root
// $XDG_STATE_HOME/testbedctl (default ~/.local/state/testbedctl), named namespaces under
// <runtime root>/.netns and hosts files under <runtime root>/.etc-netns (names a lab, which
// starts with a letter, never has). XDG_RUNTIME_DIR must be set, absolute, a directory owned by
// this user and writable by no one else, or every verb that needs it is exit 2 saying which.
//
// TESTBEDCTL_RUN_DIR, TESTBEDCTL_RESULTS_DIR and TESTBEDCTL_EXERCISE_STATE override the
// runtime, results and exercises roots in both modes (tests). Nothing is cached: tests set
// those variables between calls.
#pragma once

#include <string>

#include "core/error.h"

namespace tb::paths {

// What the decision reads; env_of_process() fills it from this process, tests fill their own.
struct Env {
  bool rootless = false;
  unsigned euid = 0;            // as this process sees it (0 inside the keeper's user namespace)
  std::string xdg_runtime_dir;  // $XDG_RUNTIME_DIR
  std::string xdg_state_home;   // $XDG_STATE_HOME
  std::string home;             // $HOME
  std::string run_dir;          // $TESTBEDCTL_RUN_DIR
  std::string results_dir;      // $TESTBEDCTL_RESULTS_DIR
  std::string exercise_state;   // $TESTBEDCTL_EXERCISE_STATE
};

struct Roots {
  bool rootless = false;
  std::string runtime;    // a lab's directory is <runtime>/<lab>
  std::string state;      // /var/lib/testbedctl, $XDG_STATE_HOME/testbedctl
  std::string results;    // <state>/results
  std::string exercises;  // <state>/exercises
  std::string netns;      // named namespaces: /run/netns, <runtime>/.netns
  std::string etc_netns;  // their hosts files: /etc/netns, <runtime>/.etc-netns
  std::string keeper;     // rootless: the keeper's pid file and lock live here (the host's view
                          // of $XDG_RUNTIME_DIR/testbedctl, under the keeper's tmpfs); root: ""
};

// The environment variable a process that joined the keeper carries (the keeper's pid): with
// a user namespace that is not the initial one, it marks the process rootless although its
// euid reads 0 there.
inline constexpr const char* kKeeperEnv = "TESTBEDCTL_KEEPER";

// True when /proc/self/uid_map is the initial namespace's identity map ("0 0 4294967295").
bool initial_user_namespace();
Env env_of_process();
// The decision; rootless checks $XDG_RUNTIME_DIR on disk (stat, no symlink followed).
Result<Roots> decide(const Env& env);
// This process's roots. Rootless with an unusable XDG_RUNTIME_DIR prints the reason and exits 2:
// testbedctl's main checks decide() before any verb runs, so only a helper program started by
// hand with a broken environment gets here.
Roots roots();
bool rootless();

// A Unix socket path must fit sockaddr_un's sun_path (108 bytes with its NUL). Exit 2 naming
// the path, its length and what makes it long (the runtime root, the lab name) otherwise.
inline constexpr std::size_t kSunPathMax = 107;
Status check_socket_path(const std::string& path, const std::string& what);

}  // namespace tb::paths
