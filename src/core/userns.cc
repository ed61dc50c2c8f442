#include "core/userns.h"

#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/paths.h"
#include "core/unique_fd.h"

namespace tb::userns {
namespace {

constexpr const char* kPidFile = "keeper.pid";
constexpr const char* kLockFile = "keeper.lock";
constexpr int kReadyTimeoutMs = 10000;
// as_user_in_keeper's child: no live keeper of that user (and one above: it could not enter).
constexpr int kNoKeeperExit = 201;

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
  // Opened before the mount namespace changes: there /proc is the keeper's pid namespace's.
  UniqueFd pid(::open((base + "pid_for_children").c_str(), O_RDONLY | O_CLOEXEC));
  if (!pid) return sys_fail("open the keeper's pid namespace " + base + "pid_for_children");
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
  // This process stays where it is; its next child is the first of it inside (fork_into_keeper).
  if (::setns(pid.get(), CLONE_NEWPID) != 0)
    return sys_fail("join the keeper's pid namespace (setns " + base + "pid_for_children)");
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

// The keeper's pid namespace's init (pid 1 there), a fork of the keeper: SIGKILL when the keeper
// dies (PR_SET_PDEATHSIG: the keeper has one thread, so its death is the parent thread's), and a
// pipe whose write end only the keeper holds, read once after the prctl for a keeper that died
// before it and then polled with the children's SIGCHLD. It mounts the namespace's own /proc in
// the keeper's mount namespace (so that a pid a lab's process reads or records is one /proc
// knows there), reaps every orphan (a lab's supervisor, once `up` has left) and leaves when the
// keeper does; its end makes the kernel SIGKILL every process of the namespace.
int run_init(int alive_fd, int ready_fd) {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
    say(ready_fd, std::string("prctl(PR_SET_PDEATHSIG): ") + std::strerror(errno));
    return 1;
  }
  pollfd gone{alive_fd, POLLIN, 0};
  if (::poll(&gone, 1, 0) != 0) return 0;  // the keeper already left
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    say(ready_fd, std::string("mount the keeper's pid namespace's /proc: ") + std::strerror(errno));
    return 1;
  }
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  UniqueFd sig(::signalfd(-1, &chld, SFD_CLOEXEC));
  if (!sig) {
    say(ready_fd, std::string("signalfd: ") + std::strerror(errno));
    return 1;
  }
  say(ready_fd, "ok");
  ::close(ready_fd);
  for (;;) {
    pollfd p[2] = {{alive_fd, POLLIN, 0}, {sig.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (p[0].revents != 0) return 0;  // the keeper left
    if (p[1].revents != 0) {
      signalfd_siginfo si{};
      [[maybe_unused]] ssize_t n = ::read(sig.get(), &si, sizeof si);
      while (::waitpid(-1, nullptr, WNOHANG) > 0) {
      }
    }
  }
}

// The relay's child (forwarded signals: see fork_into_keeper).
volatile sig_atomic_t relay_child = 0;

void forward_signal(int sig, siginfo_t* info, void*) {
  // One a process sent (kill, sigqueue, tgkill) goes on; one the terminal sent (SI_KERNEL)
  // reached the child's process group, the child included, already.
  if (info != nullptr && info->si_code <= 0 && relay_child > 0) ::kill(relay_child, sig);
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
  // A keeper killed but not yet reaped (a zombie: its parent is whatever adopted it, which reaps
  // in its own time) keeps its stat but has no namespaces left to join: gone.
  const std::string stat = read_text("/proc/" + std::to_string(k->pid) + "/stat");
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z' ||
      stat[close + 2] == 'X')
    return std::nullopt;
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
  bool init_gone = false;
  if (auto d = prepare_keeper_dir(dir, uid); !d) return fail_with(d.error().message);

  sigset_t leave;
  sigemptyset(&leave);
  sigaddset(&leave, SIGTERM);
  sigaddset(&leave, SIGINT);
  sigaddset(&leave, SIGHUP);
  sigaddset(&leave, SIGCHLD);  // the pid namespace's init left
  ::sigprocmask(SIG_BLOCK, &leave, nullptr);
  UniqueFd sig(::signalfd(-1, &leave, SFD_CLOEXEC));
  if (!sig) return fail_with(std::string("signalfd: ") + std::strerror(errno));

  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID) != 0) {
    const int e = errno;
    return fail_with(
        std::string("unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID): ") +
        std::strerror(e) + " (" + userns_sysctls() + "; `testbedctl doctor` shows the userns row)");
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

  // The pid namespace's init: every process a joined verb starts is in its namespace, so
  // whatever of a lab runs dies with it, and it with the keeper.
  int alive[2], init_ready[2];
  if (::pipe2(alive, O_CLOEXEC) != 0 || ::pipe2(init_ready, O_CLOEXEC) != 0)
    return fail_with(std::string("pipe for the pid namespace's init: ") + std::strerror(errno));
  const pid_t init = ::fork();
  if (init < 0)
    return fail_with(std::string("fork the pid namespace's init: ") + std::strerror(errno));
  if (init == 0) {
    ::close(alive[1]);
    ::close(init_ready[0]);
    if (ready_fd >= 0) ::close(ready_fd);
    sig.reset();
    ::_exit(run_init(alive[0], init_ready[1]));
  }
  ::close(alive[0]);
  ::close(init_ready[1]);
  UniqueFd keep_alive(alive[1]);
  {
    UniqueFd from_init(init_ready[0]);
    std::string answer;
    char buf[256];
    ssize_t got;
    while ((got = ::read(from_init.get(), buf, sizeof buf)) != 0) {
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) break;
      answer.append(buf, static_cast<std::size_t>(got));
      if (answer == "ok") break;
    }
    if (answer != "ok") {
      ::kill(init, SIGKILL);
      ::waitpid(init, nullptr, 0);
      ::unlinkat(host_dir.get(), kPidFile, 0);
      return fail_with(
          answer.empty() ? std::string("the pid namespace's init exited without a word") : answer);
    }
  }

  say(ready_fd, "ok");
  ::close(ready_fd);
  for (;;) {
    signalfd_siginfo si{};
    const ssize_t n = ::read(sig.get(), &si, sizeof si);
    if (n < 0 && errno == EINTR) continue;
    if (n != sizeof si) break;
    if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) break;
    if (si.ssi_signo == SIGCHLD && ::waitpid(init, nullptr, WNOHANG) == init) {
      init_gone = true;  // killed: every process of the namespace went with it
      break;
    }
    // SIGHUP (the session's terminal went away): the keeper stays.
  }
  // The pid file first, so that no verb joins a keeper on its way out; then the init, and with
  // it every process of the pid namespace, before the keeper returns.
  ::unlinkat(host_dir.get(), kPidFile, 0);
  if (!init_gone) {
    ::kill(init, SIGKILL);
    ::waitpid(init, nullptr, 0);
  }
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

std::optional<int> fork_into_keeper() {
  std::fflush(nullptr);
  // The forwarded signals held from before the fork until the relay's handlers are in place, so
  // none ends the relay and orphans the verb in between.
  sigset_t fwd, old;
  sigemptyset(&fwd);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&fwd, sig);
  ::sigprocmask(SIG_BLOCK, &fwd, &old);
  const pid_t child = ::fork();
  if (child < 0) {
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    std::fprintf(stderr, "testbedctl: fork into the keeper's pid namespace: %s\n",
                 std::strerror(errno));
    return kExitFailed;
  }
  if (child == 0) {
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    return std::nullopt;
  }
  relay_child = child;
  struct sigaction sa {};
  sa.sa_sigaction = forward_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2})
    ::sigaction(sig, &sa, nullptr);
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0)
    if (errno != EINTR) return kExitFailed;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  const int sig = WTERMSIG(status);
  // Killed: this process ends the same way, so its caller sees what the verb's process saw.
  ::signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(sig);
  return 128 + sig;
}

std::vector<UserRuntime> users_runtimes(const std::string& run_user) {
  std::vector<UserRuntime> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(run_user, ec)) {
    const std::string name = e.path().filename();
    if (name.empty() || name.size() > 10 ||
        name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const unsigned long long id = std::stoull(name);
    if (id > 0xFFFFFFFEull) continue;  // no uid
    struct stat st {};
    const std::string pid_file = e.path().string() + "/testbedctl/" + kPidFile;
    // Only a directory its uid owns, holding a pid file: the rest is checked as that user.
    if (::lstat(e.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    const unsigned uid = static_cast<unsigned>(id);
    if (uid == 0 || st.st_uid != uid || ::lstat(pid_file.c_str(), &st) != 0) continue;
    const passwd* pw = ::getpwuid(uid);
    if (pw == nullptr) continue;
    out.push_back({uid, pw->pw_gid, pw->pw_name, pw->pw_dir, e.path().string()});
  }
  std::ranges::sort(out, {}, &UserRuntime::uid);
  return out;
}

Result<AsUser> as_user_in_keeper(const UserRuntime& u, const std::function<int(int)>& fn) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return sys_fail("pipe for user " + u.user + "'s answer");
  UniqueFd rd(p[0]), wr(p[1]);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) return sys_fail("fork to enter user " + u.user + "'s keeper");
  if (child == 0) {
    rd.reset();
    // That user, with that user's powers and no more: a pid file the user wrote can name no
    // namespace the user could not join (the kernel refuses another's), and a file of the
    // user's is read with the user's rights.
    if (::setgroups(0, nullptr) != 0 || ::setresgid(u.gid, u.gid, u.gid) != 0 ||
        ::setresuid(u.uid, u.uid, u.uid) != 0)
      ::_exit(kNoKeeperExit + 1);
    ::setenv("XDG_RUNTIME_DIR", u.runtime.c_str(), 1);
    ::setenv("HOME", u.home.c_str(), 1);
    ::setenv("USER", u.user.c_str(), 1);
    for (const char* v : {"XDG_STATE_HOME", "TESTBEDCTL_RUN_DIR", "TESTBEDCTL_RESULTS_DIR",
                          "TESTBEDCTL_EXERCISE_STATE", "XTABLES_LOCKFILE", paths::kKeeperEnv})
      ::unsetenv(v);
    auto k = live_keeper(u.runtime + "/testbedctl/" + kPidFile, u.uid);
    if (!k) ::_exit(kNoKeeperExit);  // no keeper: nothing of this user's runs
    if (auto e = enter(*k); !e) {
      say(wr.get(), e.error().message);
      ::_exit(kNoKeeperExit + 1);
    }
    if (auto rc = fork_into_keeper()) ::_exit(*rc);
    const int rc = fn(wr.get());
    std::fflush(nullptr);
    ::_exit(rc);
  }
  wr.reset();
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t got = ::read(rd.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    text.append(buf, static_cast<std::size_t>(got));
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0)
    if (errno != EINTR) return sys_fail("wait for user " + u.user + "'s keeper's answer");
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (rc == kNoKeeperExit) return AsUser{false, 0, ""};
  if (rc == kNoKeeperExit + 1)
    return fail("enter user " + u.user + "'s keeper: " +
                (text.empty() ? std::string("could not take that user's ids") : text));
  return AsUser{true, rc, text};
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
