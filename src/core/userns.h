// Rootless labs' user namespace (docs/design-rootless.md §0, issue 33): a keeper per user holds a
// user namespace in which the user is uid 0, and a private mount namespace, and every verb of a
// user who is not root joins both first thing in main.
//
// The keeper (`testbedctl keeper`, started by the first verb that needs it, never typed):
// unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET); one line each in /proc/self/setgroups
// ("deny"), uid_map and gid_map ("0 <uid> 1": no newuidmap, no subordinate ids); every mount made
// private; a tmpfs (0700) on the runtime root $XDG_RUNTIME_DIR/testbedctl, which holds the labs'
// state and their named namespaces (core/paths.h), so both die with the keeper; a tmpfs on
// /dev/shm, so a lab's shared-memory segments are this user's alone. Its pid and start time (from
// /proc/PID/stat, so a reused pid is never joined) go to keeper.pid (0600) in the host's view of
// the runtime root, beside keeper.lock; then it waits on a signalfd (SIGTERM or SIGINT: it
// leaves, and with it the mount namespace and every netns bind mount in it).
//
// The network namespace is the user's "home": empty but for lo (up). A thread that entered a
// lab's namespace must be able to return (netlink/netns.h ScopedNetns), and setns into the
// host's own network namespace needs CAP_SYS_ADMIN over it, which a user namespace never gives:
// so a joined process starts, and returns, in a namespace its user namespace owns.
//
// Joining: setns into the keeper's user namespace, then its mount and network namespaces. The
// kernel allows that to a process whose euid owns the namespace and to no one else (another user
// gets EPERM: that refusal is the isolation). setns(CLONE_NEWUSER) refuses a threaded process, so
// the join checks /proc/self/status first and fails loudly when a thread exists. Joining resets the
// working directory to the namespace's root; the join restores it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace tb::userns {

struct KeeperId {
  int pid = 0;
  unsigned long long start_time = 0;  // field 22 of /proc/PID/stat, clock ticks since boot
};

// "Threads:" of /proc/self/status.
Result<int> thread_count();
// Field 22 of /proc/PID/stat; nullopt when the process is gone.
std::optional<unsigned long long> start_time(int pid);
// keeper.pid's "PID START_TIME\n"; nullopt when absent or unreadable.
std::optional<KeeperId> read_pid_file(const std::string& path);
// The running keeper the pid file names: the process exists with that start time, is no zombie
// (a killed keeper not yet reaped has no namespaces left) and belongs to this user (its /proc
// directory's owner is `euid`).
std::optional<KeeperId> live_keeper(const std::string& pid_file, unsigned euid);

// The keeper's main: returns only on failure (before it is ready) or once told to leave. It
// reports "ok" or the reason it failed on `ready_fd` (then closes it).
int run_keeper(int ready_fd);

// Joins this user's keeper, starting it (`self_exe keeper`) if none runs, under keeper.lock so
// two verbs never start two. Must be called while the process has one thread. Sets
// paths::kKeeperEnv to the keeper's pid for this process and its children.
Result<KeeperId> join_keeper(const std::string& self_exe);

// After join_keeper: this process stays outside the keeper's pid namespace (setns never moves the
// caller), so it forks, and the child — the first of its processes inside — returns nullopt and
// runs the verb, whose every descendant is then in that namespace and dies with the keeper. This
// process waits, forwards what another process signals it (SIGTERM, SIGINT, SIGHUP, SIGQUIT,
// SIGUSR1, SIGUSR2; the terminal's own signals reach the child's process group without it), and
// returns the child's exit code, or ends by the signal that ended the child. It touches no /proc
// after the join (the keeper's /proc there knows only the namespace's processes).
std::optional<int> fork_into_keeper();

// Root's view of users' keepers: /run/user/<uid>/ directories owned by their uid with a
// testbedctl/keeper.pid, that uid known to the password database.
struct UserRuntime {
  unsigned uid = 0, gid = 0;
  std::string user, home, runtime;  // runtime: /run/user/<uid>
};
std::vector<UserRuntime> users_runtimes(const std::string& run_user = "/run/user");

// Runs fn inside `u`'s keeper, never starting one: a fork takes the user's uid, gid and no
// supplementary group (so it can do nothing there the user could not), checks the pid file as
// that user (pid, start time from /proc/PID/stat, owner: a reused or forged pid is never joined),
// joins the user, mount, network and pid namespaces and forks once more, the child running fn
// with the write end of a pipe whose text comes back. `ran` is false when that user has no
// live keeper (nothing of the user's runs); an error when one runs and could not be entered.
struct AsUser {
  bool ran = false;
  int rc = 0;
  std::string text;
};
Result<AsUser> as_user_in_keeper(const UserRuntime& u, const std::function<int(int)>& fn);

// Can this user make a user namespace? Tried in a forked child (unshare(CLONE_NEWUSER)); the
// text names the sysctls that decide it where it cannot.
struct UsernsCheck {
  bool ok = false;
  std::string detail;
};
UsernsCheck check_unprivileged_userns();
// The sysctls and limits that decide it, for doctor and errors: "kernel.unprivileged_userns_clone
// = 1, user.max_user_namespaces = 63457, kernel.apparmor_restrict_unprivileged_userns = 0" (the
// ones this kernel has).
std::string userns_sysctls();

}  // namespace tb::userns
