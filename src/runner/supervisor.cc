#include "runner/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/events.h"
#include "core/safe_file.h"
#include "core/unique_fd.h"

namespace tb::runner {
namespace {

constexpr int64_t kBackoffFirstMs = 50;
constexpr int64_t kBackoffMaxMs = 2000;
constexpr int kMaxDeathsPerMinute = 8;
constexpr int kStopGraceMs = 2000;
// A child that ran this long before it died starts over from the first backoff.
constexpr int64_t kHealthyNs = 10'000'000'000;

struct Child {
  ChildSpec spec;
  ChildState state;
  int64_t next_start_ns = 0;  // when a dead child may start again
  int64_t backoff_ms = kBackoffFirstMs;
  std::vector<int64_t> deaths;  // monotonic ns of recent deaths
  int64_t started_ns = 0;       // its last spawn
  UniqueFd ready;               // notify_ready: read end of its ready pipe while starting
};

void write_status(const std::string& path, const std::vector<Child>& children) {
  std::vector<ChildState> states;
  for (const auto& c : children) states.push_back(c.state);
  if (auto w = write_file(path, states_to_json(states).dump(1) + "\n"); !w)
    std::fprintf(stderr, "supervisor: %s\n", w.error().message.c_str());
}

std::string log_name(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (c == '/' || c == ' ') c = '_';
  return s + ".log";
}

// In a forked child: output to `log_fd`, input from /dev/null, the owner marker in the
// environment (`env` is "TESTBEDCTL_OWNER=..." and must outlive the exec), no blocked signals
// but SIGHUP when `hup_blocked` (then a SIGHUP before the program takes it stays pending).
void owned_child_io(int log_fd, const std::string& env, bool hup_blocked = false) {
  ::dup2(log_fd, STDOUT_FILENO);
  ::dup2(log_fd, STDERR_FILENO);
  int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
  ::putenv(const_cast<char*>(env.c_str()));
  sigset_t mask;
  sigemptyset(&mask);
  if (hup_blocked) sigaddset(&mask, SIGHUP);
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
}

}  // namespace

nlohmann::json specs_to_json(const std::vector<ChildSpec>& specs) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& s : specs)
    j.push_back({{"name", s.name},
                 {"netns", s.netns},
                 {"argv", s.argv},
                 {"delay_ms", s.delay_ms},
                 {"hup_blocked", s.hup_blocked},
                 {"notify_ready", s.notify_ready}});
  return j;
}

Result<std::vector<ChildSpec>> specs_from_json(const nlohmann::json& j) {
  try {
    std::vector<ChildSpec> out;
    for (const auto& s : j)
      out.push_back({s.at("name"), s.at("netns"), s.at("argv"), s.value("delay_ms", 0),
                     s.value("hup_blocked", false), s.value("notify_ready", false)});
    return out;
  } catch (const nlohmann::json::exception& e) {
    return fail(std::string("malformed supervisor spec: ") + e.what());
  }
}

nlohmann::json states_to_json(const std::vector<ChildState>& states) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& s : states)
    j.push_back({{"name", s.name},
                 {"pid", s.pid},
                 {"running", s.running},
                 {"starting", s.starting},
                 {"broken", s.broken},
                 {"restarts", s.restarts},
                 {"last_exit", s.last_exit}});
  return j;
}

std::vector<ChildState> states_from_json(const nlohmann::json& j) {
  std::vector<ChildState> out;
  if (!j.is_array()) return out;
  for (const auto& s : j)
    out.push_back({s.value("name", ""), s.value("pid", 0), s.value("running", false),
                   s.value("starting", false), s.value("broken", false), s.value("restarts", 0),
                   s.value("last_exit", "")});
  return out;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "stopped";
}

Result<int> spawn_in_netns(const std::string& netns, const std::vector<std::string>& argv,
                           const std::string& owner, const std::string& log_path, bool hup_blocked,
                           UniqueFd* ready) {
  if (argv.empty()) return fail("spawn in " + netns + ": empty command");
  UniqueFd ns(::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns) return sys_fail("spawn in " + netns + ": open namespace");
  auto log = open_file(log_path, O_WRONLY | O_CREAT | O_APPEND);
  if (!log) return std::unexpected(with_context(log.error(), "spawn in " + netns));
  const std::string env = std::string(kOwnerEnv) + "=" + owner;
  // Closed by a successful exec (O_CLOEXEC), written to before a failed child exits: the parent
  // returns once the child runs its program, whose environment carries the owner marker. Between
  // fork and exec /proc/PID/environ is still ours, so a child reported running before its exec
  // could not be found by its marker (a race seen under load by the supervisor test).
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) return sys_fail("spawn in " + netns + ": pipe");
  UniqueFd exec_r(exec_pipe[0]), exec_w(exec_pipe[1]);
  // The ready pipe: CLOEXEC on both ends here; the child clears it on its write end only.
  UniqueFd ready_r, ready_w;
  std::string ready_env;
  if (ready) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return sys_fail("spawn in " + netns + ": pipe");
    ready_r.reset(p[0]);
    ready_w.reset(p[1]);
    ready_env = std::string(kReadyFdEnv) + "=" + std::to_string(ready_w.get());
  }
  pid_t pid = ::fork();
  if (pid < 0) return sys_fail("spawn in " + netns + ": fork");
  if (pid == 0) {
    const char failed = 1;
    ::setpgid(0, 0);  // its own group: a terminal's Ctrl-C does not reach it
    if (::setns(ns.get(), CLONE_NEWNET) != 0) {
      (void)!::write(exec_w.get(), &failed, 1);
      ::_exit(126);
    }
    owned_child_io(log->get(), env, hup_blocked);
    if (ready_w) {
      ::fcntl(ready_w.get(), F_SETFL, 0);  // a blocking write end for the child
      ::fcntl(ready_w.get(), F_SETFD, 0);  // kept across exec
      ::putenv(const_cast<char*>(ready_env.c_str()));
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    (void)!::write(exec_w.get(), &failed, 1);
    ::_exit(127);
  }
  exec_w.reset();
  ready_w.reset();
  if (ready) *ready = std::move(ready_r);
  // Bounded: exec takes milliseconds; 5 s covers a machine with every core busy many times over.
  // A child that fails before exec exits at once and is reaped as a death, as before.
  pollfd p{exec_r.get(), POLLIN, 0};
  while (::poll(&p, 1, 5000) < 0 && errno == EINTR) {
  }
  return pid;
}

Status supervise(const std::vector<ChildSpec>& specs, const std::string& owner,
                 const SupervisorPaths& paths, const std::atomic<bool>& stop,
                 std::atomic<bool>* reload, const std::function<std::vector<ChildSpec>()>& more) {
  std::vector<Child> children;
  const int64_t began = monotonic_ns();
  for (const auto& s : specs)
    children.push_back(
        {s, ChildState{s.name}, began + int64_t{s.delay_ms} * 1'000'000, kBackoffFirstMs, {}});
  auto event = [&](const char* what, const Child& c, const std::string& detail = "") {
    nlohmann::json e = {
        {"event", what}, {"child", c.spec.name}, {"netns", c.spec.netns}, {"pid", c.state.pid}};
    if (!detail.empty()) e["detail"] = detail;
    (void)append_event(paths.events, e);
  };
  while (!stop.load()) {
    const int64_t now = monotonic_ns();
    bool changed = false;
    if (reload && reload->exchange(false)) {
      for (auto& c : children) {
        if (!c.state.broken) continue;  // given up on: a fresh start
        c.state.broken = false;
        c.deaths.clear();
        c.backoff_ms = kBackoffFirstMs;
        c.next_start_ns = now;
        event("revived", c);
        changed = true;
      }
      if (more)
        for (const auto& spec : more())
          if (std::ranges::none_of(children,
                                   [&](const Child& c) { return c.spec.name == spec.name; })) {
            children.push_back({spec, ChildState{spec.name}, 0, kBackoffFirstMs, {}});
            changed = true;
          }
    }
    for (auto& c : children) {
      if (c.state.running || c.state.starting || c.state.broken || now < c.next_start_ns) continue;
      auto pid =
          spawn_in_netns(c.spec.netns, c.spec.argv, owner, paths.logs + "/" + log_name(c.spec.name),
                         c.spec.hup_blocked, c.spec.notify_ready ? &c.ready : nullptr);
      if (!pid) {
        c.state.last_exit = pid.error().message;
        c.next_start_ns = now + c.backoff_ms * 1'000'000;
        c.backoff_ms = std::min(c.backoff_ms * 2, kBackoffMaxMs);
        event("start_failed", c, pid.error().message);
        changed = true;
        continue;
      }
      const bool restart = c.state.pid != 0;
      c.state.pid = *pid;
      c.state.running = !c.spec.notify_ready;
      c.state.starting = c.spec.notify_ready;
      c.state.restarts += restart;
      c.started_ns = now;
      event(restart ? "restarted" : "started", c);
      changed = true;
    }
    // Children that say when they are ready: running from their byte on.
    for (auto& c : children) {
      if (!c.state.starting || !c.ready) continue;
      char byte = 0;
      const ssize_t n = ::read(c.ready.get(), &byte, 1);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      c.ready.reset();  // a byte, or EOF (it exits: waitpid below reports it)
      if (n != 1) continue;
      c.state.starting = false;
      c.state.running = true;
      event("ready", c);
      changed = true;
    }
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      for (auto& c : children) {
        if (c.state.pid != pid || !(c.state.running || c.state.starting)) continue;
        c.state.running = c.state.starting = false;
        c.ready.reset();
        c.state.last_exit = describe_exit(status);
        c.deaths.push_back(now);
        std::erase_if(c.deaths, [&](int64_t t) { return now - t > 60'000'000'000; });
        c.state.broken = static_cast<int>(c.deaths.size()) >= kMaxDeathsPerMinute;
        if (now - c.started_ns >= kHealthyNs) c.backoff_ms = kBackoffFirstMs;  // it was healthy
        c.next_start_ns = now + c.backoff_ms * 1'000'000;
        c.backoff_ms = std::min(c.backoff_ms * 2, kBackoffMaxMs);
        event(c.state.broken ? "broken" : "died", c, c.state.last_exit);
        changed = true;
      }
    }
    if (changed) write_status(paths.status, children);
    // Up to 20 ms until the next look, but a starting child's ready byte (or its exit, EOF) ends
    // the wait at once: `up` waits for every stage to serve, and 10 stages each seen up to 20 ms
    // late added up (issue 34).
    std::vector<pollfd> waiting;
    for (const auto& c : children)
      if (c.state.starting && c.ready) waiting.push_back({c.ready.get(), POLLIN, 0});
    if (waiting.empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    else
      (void)::poll(waiting.data(), waiting.size(), 20);
  }
  std::vector<int> pids;
  for (const auto& c : children)
    if (c.state.running || c.state.starting) pids.push_back(c.state.pid);
  terminate(pids, kStopGraceMs);
  for (auto& c : children) {
    if (c.state.running || c.state.starting) event("stopped", c);
    c.state.running = c.state.starting = false;
  }
  write_status(paths.status, children);
  return {};
}

// How often start_supervisor reads the status file while it waits (a small file; the wait is
// about 0.1 s for a small lab's stages, so 20 ms steps were a fifth of it).
constexpr int kStartPollMs = 2;

Status start_supervisor(const std::string& lab, const std::string& lab_dir,
                        const std::string& owner, const std::vector<ChildSpec>& specs,
                        int wait_ms) {
  const std::string spec_path = lab_dir + "/supervisor-spec.json";
  const std::string status_path = lab_dir + "/supervisor.json";
  TB_TRY(write_file(spec_path, specs_to_json(specs).dump(1) + "\n"));
  std::filesystem::remove(status_path);
  auto log = open_file(lab_dir + "/supervisor.log", O_WRONLY | O_CREAT | O_APPEND);
  if (!log) return std::unexpected(log.error());
  const std::string env = std::string(kOwnerEnv) + "=" + owner;
  pid_t pid = ::fork();
  if (pid < 0) return sys_fail("start supervisor: fork");
  if (pid == 0) {
    // Double fork: the daemon is reparented to init and outlives `up`.
    if (::fork() != 0) ::_exit(0);
    ::setsid();
    owned_child_io(log->get(), env);
    ::execl("/proc/self/exe", "testbedctl", "supervise", lab.c_str(), nullptr);
    ::_exit(127);
  }
  ::waitpid(pid, nullptr, 0);
  // Each child gets wait_ms from its own first start: FRR's bgpd starts 2 s after zebra, which
  // left it 1 s under a flat 3 s (in the lab VM's emulated CPU it missed that).
  int latest = 0;
  for (const auto& c : specs) latest = std::max(latest, c.delay_ms);
  wait_ms += latest;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  std::string last = "no status yet";
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(status_path);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_discarded()) {
      auto states = states_from_json(j);
      if (states.size() == specs.size() &&
          std::ranges::all_of(states, [](const ChildState& c) { return c.running; }))
        return {};
      for (const auto& c : states)
        if (!c.running) last = c.name + ": " + (c.last_exit.empty() ? "not running" : c.last_exit);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kStartPollMs));
  }
  return fail("supervised processes did not start within " + std::to_string(wait_ms) + " ms (" +
              last + "; see " + lab_dir + "/supervisor.log and logs/)");
}

}  // namespace tb::runner
