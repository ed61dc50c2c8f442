// spawn_process (spawn.h): clone(CLONE_VM | CLONE_VFORK) on a stack of our own, the child's
// steps on prepared data only.
#include "core/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace tb {
namespace {

// The child's stack: its steps are a handful of system call wrappers.
constexpr size_t kChildStack = 64 * 1024;

// Everything the child reads, made before the clone; `failed_step` and `failed_errno` are what
// it writes back (our memory is its memory) when a step fails.
struct ChildPlan {
  const SpawnSpec* spec = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  sigset_t mask{};
  const char* failed_step = nullptr;
  int failed_errno = 0;
};

int child_main(void* arg) {
  auto* plan = static_cast<ChildPlan*>(arg);
  const SpawnSpec& s = *plan->spec;
  auto fail = [plan](const char* step) {
    plan->failed_errno = errno;  // errno is the caller's thread's: read it before anything else
    plan->failed_step = step;
    ::_exit(127);
    return 0;
  };
  // Handlers are ours until the exec: a signal arriving before it must not run our code on our
  // memory. The mask (all blocked by the caller) is set last.
  reset_signal_handlers();
  if (s.new_session && ::setsid() < 0) return fail("setsid");
  if (s.new_group && !s.new_session && ::setpgid(0, 0) != 0) return fail("setpgid");
  if (s.netns_fd >= 0 && ::setns(s.netns_fd, CLONE_NEWNET) != 0) return fail("setns");
  int in = s.stdin_fd;
  if (in < 0 && (in = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) return fail("open /dev/null");
  if (::dup2(in, STDIN_FILENO) < 0) return fail("stdin");
  if (s.stdout_fd >= 0 && ::dup2(s.stdout_fd, STDOUT_FILENO) < 0) return fail("stdout");
  if (s.stderr_fd >= 0 && ::dup2(s.stderr_fd, STDERR_FILENO) < 0) return fail("stderr");
  if (s.keep_fd >= 0 &&
      (::fcntl(s.keep_fd, F_SETFD, 0) != 0 || ::fcntl(s.keep_fd, F_SETFL, 0) != 0))
    return fail("keep fd");
  if (s.close_other_fds) {
    const unsigned first = STDERR_FILENO + 1, keep = static_cast<unsigned>(s.keep_fd);
    if (s.keep_fd > STDERR_FILENO) {
      if (keep > first) ::close_range(first, keep - 1, 0);
      ::close_range(keep + 1, ~0U, 0);
    } else {
      ::close_range(first, ~0U, 0);
    }
  }
  ::sigprocmask(SIG_SETMASK, &plan->mask, nullptr);
  ::execve(s.path.c_str(), plan->argv, plan->envp);
  return fail("exec");
}

}  // namespace

std::vector<std::string> environment_with(const std::vector<std::string>& add) {
  std::vector<std::string> env;
  auto name_of = [](const std::string& kv) { return kv.substr(0, kv.find('=')); };
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    bool replaced = false;
    for (const auto& a : add) replaced = replaced || name_of(a) == name_of(kv);
    if (!replaced) env.push_back(std::move(kv));
  }
  env.insert(env.end(), add.begin(), add.end());
  return env;
}

void reset_signal_handlers() {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN ||
        old.sa_handler == SIG_DFL)
      continue;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
  }
}

Result<int> spawn_process(const SpawnSpec& spec) {
  const std::string what = "start " + spec.path;
  if (spec.argv.empty() || spec.path.empty()) return fail(what + ": empty command");
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  void* stack = ::mmap(nullptr, kChildStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return sys_fail(what + ": child stack");
  ChildPlan plan{&spec, argv.data(), envp.data()};
  // Every signal blocked from the clone until the child has reset its handlers; the child
  // execs with spec.mask, else with the mask we had.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  plan.mask = spec.mask.value_or(old);
  const int pid = ::clone(child_main, static_cast<char*>(stack) + kChildStack,
                          CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
  const int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::munmap(stack, kChildStack);
  if (pid < 0) return sys_fail(what + ": clone", clone_errno);
  if (plan.failed_step) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return sys_fail(what + ": " + plan.failed_step, plan.failed_errno);
  }
  return pid;
}

}  // namespace tb
