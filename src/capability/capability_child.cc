// The forked-child harness and the tool runner (capability_probes.h).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "capability/capability_checks.h"
#include "core/unique_fd.h"

namespace tb::capability::probe {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxRead = 64 * 1024;
constexpr size_t kMaxToolOutput = 300;

int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Reads `fd` until EOF or the deadline; false on timeout.
bool read_until_eof(int fd, std::string& out, Clock::time_point deadline) {
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    if (out.size() < kMaxRead) out.append(buf, static_cast<size_t>(n));
  }
}

// Waits for `pid` until the deadline, then kills its process group (which the child leads) and
// reaps it. Returns the wait status, and whether it had to kill.
int reap(pid_t pid, Clock::time_point deadline, bool& killed) {
  killed = false;
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return 0;
    if (ms_left(deadline) == 0) break;
    ::usleep(2000);
  }
  killed = true;
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// In a child: become a process-group leader (so the parent can kill us and anything we start)
// and die with the parent, even one that died before the prctl.
void child_setup(pid_t parent) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

std::string trim(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\t') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  size_t b = s.find_first_not_of(' ');
  s = b == std::string::npos ? "" : s.substr(b);
  if (s.size() > kMaxToolOutput) s = s.substr(0, kMaxToolOutput) + "...";
  return s;
}

}  // namespace

Outcome in_child(const std::function<Outcome()>& fn, int unshare_flags,
                 std::chrono::milliseconds timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return no(std::string("pipe: ") + std::strerror(errno));
  UniqueFd rd(fds[0]), wr(fds[1]);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return no(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    child_setup(parent);
    rd.reset();
    Outcome o;
    if (unshare_flags != 0 && ::unshare(unshare_flags) != 0) {
      int e = errno;
      o.detail = std::string("unshare: ") + std::strerror(e);
      if (e == EPERM && ::geteuid() != 0) o.detail = "needs root (" + o.detail + ")";
    } else {
      try {
        o = fn();
      } catch (const std::exception& ex) {
        o = no(std::string("probe failed: ") + ex.what());
      }
    }
    write_all(wr.get(), (o.available ? "1" : "0") + o.detail);
    ::_exit(0);
  }
  ::setpgid(pid, pid);  // also done by the child; whichever runs first wins the race
  wr.reset();
  auto deadline = Clock::now() + timeout;
  std::string got;
  bool complete = read_until_eof(rd.get(), got, deadline);
  bool killed = false;
  int status = reap(pid, deadline, killed);
  if (!complete || killed) {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.1f", timeout.count() / 1000.0);
    return no(std::string("probe timed out after ") + secs + " s and was killed");
  }
  if (got.empty()) {
    if (WIFSIGNALED(status))
      return no("probe child died: " + std::string(strsignal(WTERMSIG(status))));
    return no("probe child exited without reporting");
  }
  return Outcome{got[0] == '1', got.substr(1)};
}

std::string find_tool(const std::string& name) {
  std::string dirs;
  if (const char* p = std::getenv("PATH")) dirs = p;
  dirs += ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::stringstream ss(dirs);
  for (std::string dir; std::getline(ss, dir, ':');) {
    if (dir.empty() || dir[0] != '/') continue;
    std::string path = dir + "/" + name;
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

ToolRun run_tool(const std::string& path, const std::vector<std::string>& args,
                 std::chrono::milliseconds timeout) {
  ToolRun run;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    run.output = std::string("pipe: ") + std::strerror(errno);
    return run;
  }
  UniqueFd rd(fds[0]), wr(fds[1]);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char env_path[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  char env_lang[] = "LC_ALL=C";
  char* envp[] = {env_path, env_lang, nullptr};
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    run.output = std::string("fork: ") + std::strerror(errno);
    return run;
  }
  if (pid == 0) {
    child_setup(parent);
    ::dup2(wr.get(), STDOUT_FILENO);  // dup2 clears O_CLOEXEC on the copies
    ::dup2(wr.get(), STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execve(path.c_str(), argv.data(), envp);
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  wr.reset();
  auto deadline = Clock::now() + timeout;
  std::string out;
  bool complete = read_until_eof(rd.get(), out, deadline);
  bool killed = false;
  int status = reap(pid, deadline, killed);
  run.output = trim(out);
  if (!complete || killed) {
    run.state = ToolRun::State::kTimedOut;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && out.empty()) {
    run.state = ToolRun::State::kExecFailed;
    run.output = "exec " + path + " failed";
  } else {
    run.state = ToolRun::State::kExited;
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return run;
}

}  // namespace tb::capability::probe
