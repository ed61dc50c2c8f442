#include "core/userns.h"

#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/paths.h"
#include "core/unique_fd.h"

namespace tb::userns {
namespace {

constexpr const char* kPidFile = "keeper.pid";
constexpr const char* kLockFile = "keeper.lock";
constexpr int kReadyTimeoutMs = 10000;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Writes `text` to a /proc file in one write (uid_map and friends take exactly one).
Status write_proc(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return sys_fail("open " + path);
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return sys_fail("write \"" + trim(text) + "\" to " + path);
  return {};
}

void say(int fd, const std::string& text) {
  if (fd < 0) return;
  [[maybe_unused]] ssize_t n = ::write(fd, text.data(), text.size());
}

// The keeper directory in the host's view: made 0700 where missing, a directory of ours.
Status prepare_keeper_dir(const std::string& dir, unsigned euid) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return sys_fail("make " + dir);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return sys_fail("stat " + dir);
  if (!S_ISDIR(st.st_mode)) return bad_input(dir + " is not a directory (a symlink is refused)");
  if (st.st_uid != euid)
    return bad_input(dir + " belongs to uid " + std::to_string(st.st_uid) + ", not to you");
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0)
    return sys_fail("chmod 0700 " + dir);
  return {};
}

Status enter(const KeeperId& k) {
  const std::string base = "/proc/" + std::to_string(k.pid) + "/ns/";
  UniqueFd user(::open((base + "user").c_str(), O_RDONLY | O_CLOEXEC));
  if (!user) return sys_fail("open the keeper's user namespace " + base + "user");
  UniqueFd mnt(::open((base + "mnt").c_str(), O_RDONLY | O_CLOEXEC));
  if (!mnt) return sys_fail("open the keeper's mount namespace " + base + "mnt");
  UniqueFd net(::open((base + "net").c_str(), O_RDONLY | O_CLOEXEC));
  if (!net) return sys_fail("open the keeper's network namespace " + base + "net");
  // The descriptors are the namespaces now; the pid must still be the keeper we checked.
  if (start_time(k.pid) != k.start_time)
    return fail("keeper " + std::to_string(k.pid) + " left while being joined", ESRCH);
  char cwd[PATH_MAX];
  const bool have_cwd = ::getcwd(cwd, sizeof cwd) != nullptr;
  if (::setns(user.get(), CLONE_NEWUSER) != 0)
    return sys_fail("join the keeper's user namespace (setns " + base + "user)");
  if (::setns(mnt.get(), CLONE_NEWNS) != 0)
    return sys_fail("join the keeper's mount namespace (setns " + base + "mnt)");
  if (::setns(net.get(), CLONE_NEWNET) != 0)
    return sys_fail("join the keeper's network namespace (setns " + base + "net)");
  // setns(CLONE_NEWNS) moved the working directory to the namespace's root.
  if (have_cwd && ::chdir(cwd) != 0)
    return sys_fail(std::string("return to the working directory ") + cwd +
                    " inside the keeper's mount namespace");
  ::setenv(paths::kKeeperEnv, std::to_string(k.pid).c_str(), 1);
  // iptables-legacy locks /run/xtables.lock, which a user may not make; inside the user
  // namespace only the lab's own tables are reachable, so a lock of the user's own serves.
  if (auto r = paths::decide(paths::env_of_process()); r && !std::getenv("XTABLES_LOCKFILE"))
    ::setenv("XTABLES_LOCKFILE", (r->runtime + "/.xtables.lock").c_str(), 0);
  return {};
}

// Starts `self_exe keeper` detached (its own session, stdio on /dev/null) and waits for its
// "ok" or its reason.
Status start_keeper(const std::string& self_exe) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return sys_fail("pipe for the keeper");
  UniqueFd rd(p[0]), wr(p[1]);
  const pid_t child = ::fork();
  if (child < 0) return sys_fail("fork the keeper");
  if (child == 0) {
    // Double fork: the keeper is no child of a verb (nothing of ours waits for it).
    if (::fork() != 0) ::_exit(0);
    ::setsid();
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    const int fd = ::dup(wr.get());  // without O_CLOEXEC: the keeper writes its answer here
    const std::string env = "TESTBEDCTL_KEEPER_READY=" + std::to_string(fd);
    ::putenv(const_cast<char*>(env.c_str()));
    ::execl(self_exe.c_str(), "testbedctl", "keeper", static_cast<char*>(nullptr));
    say(fd, "exec " + self_exe + ": " + std::strerror(errno));
    ::_exit(127);
  }
  wr.reset();
  int status = 0;
  ::waitpid(child, &status, 0);
  std::string answer;
  char buf[512];
  for (;;) {
    pollfd pfd{rd.get(), POLLIN, 0};
    const int n = ::poll(&pfd, 1, kReadyTimeoutMs);
    if (n == 0) return fail("the keeper did not say it was ready within 10 s");
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_fail("wait for the keeper");
    }
    const ssize_t got = ::read(rd.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    answer.append(buf, static_cast<std::size_t>(got));
  }
  if (answer == "ok") return {};
  return bad_input("could not start this user's keeper (testbedctl keeper): " +
                   (answer.empty() ? std::string("it exited without a word") : answer));
}

// The home network namespace's lo up (it starts down), so a process of the user's at home can
// still reach 127.0.0.1.
Status loopback_up() {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return sys_fail("socket for lo");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(fd.get(), SIOCGIFFLAGS, &ifr) != 0) return sys_fail("SIOCGIFFLAGS lo");
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  if (::ioctl(fd.get(), SIOCSIFFLAGS, &ifr) != 0) return sys_fail("bring lo up");
  return {};
}

unsigned long read_ulong(const std::string& path, bool& found) {
  std::ifstream in(path);
  unsigned long v = 0;
  found = static_cast<bool>(in >> v);
  return v;
}

}  // namespace

Result<int> thread_count() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("Threads:")) return std::atoi(line.c_str() + 8);
  return fail("no Threads: line in /proc/self/status");
}

std::optional<unsigned long long> start_time(int pid) {
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  // comm (field 2) is in parentheses and may hold spaces: count from the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return std::nullopt;
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  }
  return std::nullopt;
}

std::optional<KeeperId> read_pid_file(const std::string& path) {
  std::ifstream in(path);
  KeeperId k;
  if (!(in >> k.pid >> k.start_time) || k.pid <= 0) return std::nullopt;
  return k;
}

std::optional<KeeperId> live_keeper(const std::string& pid_file, unsigned euid) {
  auto k = read_pid_file(pid_file);
  if (!k) return std::nullopt;
  if (start_time(k->pid) != k->start_time) return std::nullopt;
  struct stat st {};
  if (::stat(("/proc/" + std::to_string(k->pid)).c_str(), &st) != 0 || st.st_uid != euid)
    return std::nullopt;
  return k;
}

int run_keeper(int ready_fd) {
  const unsigned uid = ::geteuid(), gid = ::getegid();
  auto fail_with = [ready_fd](const std::string& why) {
    say(ready_fd, why);
    return kExitBadInput;
  };
  if (uid == 0)
    return fail_with("root never uses a keeper (its labs are in the host's namespaces)");
  auto roots = paths::decide(paths::env_of_process());
  if (!roots) return fail_with(roots.error().message);
  const std::string dir = roots->keeper;
  if (auto d = prepare_keeper_dir(dir, uid); !d) return fail_with(d.error().message);

  sigset_t leave;
  sigemptyset(&leave);
  sigaddset(&leave, SIGTERM);
  sigaddset(&leave, SIGINT);
  sigaddset(&leave, SIGHUP);
  ::sigprocmask(SIG_BLOCK, &leave, nullptr);
  UniqueFd sig(::signalfd(-1, &leave, SFD_CLOEXEC));
  if (!sig) return fail_with(std::string("signalfd: ") + std::strerror(errno));

  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) != 0) {
    const int e = errno;
    return fail_with(std::string("unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET): ") +
                     std::strerror(e) + " (" + userns_sysctls() +
                     "; `testbedctl doctor` shows the userns row)");
  }
  if (auto s = write_proc("/proc/self/setgroups", "deny"); !s) return fail_with(s.error().message);
  if (auto s = write_proc("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n"); !s)
    return fail_with(s.error().message);
  if (auto s = write_proc("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n"); !s)
    return fail_with(s.error().message);
  if (auto lo = loopback_up(); !lo) return fail_with(lo.error().message);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return fail_with(std::string("make every mount private: ") + std::strerror(errno));

  // The host's view of the keeper directory, kept to write and at the end remove the pid file
  // beneath the tmpfs that is about to cover it.
  UniqueFd host_dir(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!host_dir) return fail_with("open " + dir + ": " + std::strerror(errno));
  const auto me = start_time(::getpid());
  if (!me) return fail_with("read this process's start time from /proc/self/stat");
  {
    const std::string tmp = std::string(kPidFile) + ".new";
    UniqueFd pf(::openat(host_dir.get(), tmp.c_str(),
                         O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!pf) return fail_with("write " + dir + "/" + tmp + ": " + std::strerror(errno));
    ::fchmod(pf.get(), 0600);
    const std::string text = std::to_string(::getpid()) + " " + std::to_string(*me) + "\n";
    if (::write(pf.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
      return fail_with("write " + dir + "/" + tmp + ": " + std::strerror(errno));
    if (::renameat(host_dir.get(), tmp.c_str(), host_dir.get(), kPidFile) != 0)
      return fail_with("rename " + tmp + " to " + kPidFile + ": " + std::strerror(errno));
  }
  if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700") != 0)
    return fail_with("mount a tmpfs on " + dir + ": " + std::strerror(errno));
  if (::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
    return fail_with(std::string("mount a tmpfs on /dev/shm: ") + std::strerror(errno));
  if (::chdir("/") != 0) return fail_with(std::string("chdir /: ") + std::strerror(errno));

  say(ready_fd, "ok");
  ::close(ready_fd);
  for (;;) {
    signalfd_siginfo si{};
    const ssize_t n = ::read(sig.get(), &si, sizeof si);
    if (n < 0 && errno == EINTR) continue;
    if (n != sizeof si) break;
    if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) break;
    // SIGHUP (the session's terminal went away): the keeper stays.
  }
  ::unlinkat(host_dir.get(), kPidFile, 0);
  return 0;
}

Result<KeeperId> join_keeper(const std::string& self_exe) {
  auto threads = thread_count();
  if (!threads) return std::unexpected(threads.error());
  if (*threads != 1)
    return fail("testbedctl has " + std::to_string(*threads) +
                " threads before joining this user's keeper; setns(CLONE_NEWUSER) needs one "
                "(something started a thread before main's first line: a bug)");
  auto roots = paths::decide(paths::env_of_process());
  if (!roots) return std::unexpected(roots.error());
  const unsigned euid = ::geteuid();
  TB_TRY(prepare_keeper_dir(roots->keeper, euid));
  const std::string pid_file = roots->keeper + "/" + kPidFile;
  const std::string lock_path = roots->keeper + "/" + kLockFile;
  UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!lock) return sys_fail("open " + lock_path);
  while (::flock(lock.get(), LOCK_EX) != 0)
    if (errno != EINTR) return sys_fail("lock " + lock_path);
  auto k = live_keeper(pid_file, euid);
  if (!k) {
    TB_TRY(start_keeper(self_exe));
    k = live_keeper(pid_file, euid);
    if (!k) return fail("the keeper said it was ready but " + pid_file + " names no live keeper");
  }
  TB_TRY(enter(*k));
  return *k;
}

std::string userns_sysctls() {
  std::string out;
  auto add = [&out](const char* name, const char* path) {
    bool found = false;
    const unsigned long v = read_ulong(path, found);
    if (!found) return;
    out += (out.empty() ? "" : ", ") + std::string(name) + " = " + std::to_string(v);
  };
  add("kernel.unprivileged_userns_clone", "/proc/sys/kernel/unprivileged_userns_clone");
  add("user.max_user_namespaces", "/proc/sys/user/max_user_namespaces");
  add("kernel.apparmor_restrict_unprivileged_userns",
      "/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  return out.empty() ? "no userns sysctl readable" : out;
}

UsernsCheck check_unprivileged_userns() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return {false, std::string("pipe: ") + std::strerror(errno)};
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(p[0]);
    ::close(p[1]);
    return {false, std::string("fork: ") + std::strerror(errno)};
  }
  if (child == 0) {
    ::close(p[0]);
    const int rc = ::unshare(CLONE_NEWUSER);
    const int e = rc == 0 ? 0 : errno;
    [[maybe_unused]] ssize_t n = ::write(p[1], &e, sizeof e);
    ::_exit(0);
  }
  ::close(p[1]);
  int e = -1;
  const ssize_t n = ::read(p[0], &e, sizeof e);
  ::close(p[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (n != sizeof e) return {false, "the child that tried unshare(CLONE_NEWUSER) said nothing"};
  if (e == 0)
    return {true, "unshare(CLONE_NEWUSER) succeeded in a child (" + userns_sysctls() + ")"};
  return {false, std::string("unshare(CLONE_NEWUSER) in a child: ") + std::strerror(e) + " (" +
                     userns_sysctls() +
                     "; Debian: sysctl kernel.unprivileged_userns_clone=1; Ubuntu 23.10+: an "
                     "AppArmor profile with `userns,` for testbedctl, or "
                     "kernel.apparmor_restrict_unprivileged_userns=0)"};
}

}  // namespace tb::userns
