#include "core/paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tb::paths {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// XDG_RUNTIME_DIR as the base specification wants it: absolute, a directory (not a symlink),
// owned by this user, with access for that user only.
Status check_runtime_dir(const Env& env) {
  const std::string& d = env.xdg_runtime_dir;
  const std::string fix =
      "; a login session sets it (pam_systemd: /run/user/$UID); otherwise make a directory of "
      "your own, chmod 0700, and export XDG_RUNTIME_DIR=<it>";
  if (d.empty())
    return bad_input(
        "rootless testbedctl keeps labs under $XDG_RUNTIME_DIR/testbedctl, and "
        "XDG_RUNTIME_DIR is not set" +
        fix);
  if (d.front() != '/') return bad_input("XDG_RUNTIME_DIR=" + d + " is not an absolute path" + fix);
  struct stat st {};
  if (::lstat(d.c_str(), &st) != 0)
    return bad_input("XDG_RUNTIME_DIR=" + d + ": " + std::strerror(errno) + fix);
  if (!S_ISDIR(st.st_mode))
    return bad_input("XDG_RUNTIME_DIR=" + d + " is not a directory (a symlink is refused)" + fix);
  if (st.st_uid != env.euid)
    return bad_input("XDG_RUNTIME_DIR=" + d + " belongs to uid " + std::to_string(st.st_uid) +
                     ", not to you (uid " + std::to_string(env.euid) + ")" + fix);
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    return bad_input("XDG_RUNTIME_DIR=" + d + " has mode " + mode +
                     "; other users could reach it, it must be 0700" + fix);
  }
  return {};
}

}  // namespace

bool initial_user_namespace() {
  std::ifstream in("/proc/self/uid_map");
  unsigned long inside = 1, outside = 1, count = 0;
  if (!(in >> inside >> outside >> count)) return true;  // no /proc: nothing says otherwise
  std::string more;
  return inside == 0 && outside == 0 && count == 4294967295UL && !(in >> more);
}

Env env_of_process() {
  Env e;
  e.euid = ::geteuid();
  e.rootless = e.euid != 0 || (!env_or_empty(kKeeperEnv).empty() && !initial_user_namespace());
  e.xdg_runtime_dir = env_or_empty("XDG_RUNTIME_DIR");
  e.xdg_state_home = env_or_empty("XDG_STATE_HOME");
  e.home = env_or_empty("HOME");
  e.run_dir = env_or_empty("TESTBEDCTL_RUN_DIR");
  e.results_dir = env_or_empty("TESTBEDCTL_RESULTS_DIR");
  e.exercise_state = env_or_empty("TESTBEDCTL_EXERCISE_STATE");
  return e;
}

Result<Roots> decide(const Env& env) {
  Roots r;
  r.rootless = env.rootless;
  if (!env.rootless) {
    r.runtime = "/run/testbedctl";
    r.state = "/var/lib/testbedctl";
    r.netns = "/run/netns";  // iproute2 include/namespace.h NETNS_RUN_DIR
    r.etc_netns = "/etc/netns";
  } else {
    TB_TRY(check_runtime_dir(env));
    r.keeper = env.xdg_runtime_dir + "/testbedctl";
    r.runtime = r.keeper;
    r.netns = r.keeper + "/.netns";
    r.etc_netns = r.keeper + "/.etc-netns";
    // XDG base directory specification: relative values are invalid and are ignored.
    if (!env.xdg_state_home.empty() && env.xdg_state_home.front() == '/') {
      r.state = env.xdg_state_home + "/testbedctl";
    } else if (!env.home.empty() && env.home.front() == '/') {
      r.state = env.home + "/.local/state/testbedctl";
    } else {
      return bad_input(
          "rootless testbedctl keeps results under $XDG_STATE_HOME/testbedctl or "
          "$HOME/.local/state/testbedctl, and neither XDG_STATE_HOME nor HOME is "
          "an absolute path; set one");
    }
  }
  r.results = r.state + "/results";
  r.exercises = r.state + "/exercises";
  if (!env.run_dir.empty()) r.runtime = env.run_dir;
  if (!env.results_dir.empty()) r.results = env.results_dir;
  if (!env.exercise_state.empty()) r.exercises = env.exercise_state;
  return r;
}

Roots roots() {
  auto r = decide(env_of_process());
  if (!r) {
    std::fprintf(stderr, "testbedctl: %s\n", r.error().message.c_str());
    std::exit(kExitBadInput);
  }
  return std::move(*r);
}

bool rootless() {
  return env_of_process().rootless;
}

Status check_socket_path(const std::string& path, const std::string& what) {
  if (path.size() <= kSunPathMax) return {};
  return bad_input(what + " would be the Unix socket " + path + " (" + std::to_string(path.size()) +
                   " bytes; a socket path holds at most " + std::to_string(kSunPathMax) +
                   "): use a shorter lab name, or a shorter XDG_RUNTIME_DIR / TESTBEDCTL_RUN_DIR");
}

}  // namespace tb::paths
