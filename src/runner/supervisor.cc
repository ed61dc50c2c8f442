#include "runner/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/events.h"
#include "core/paths.h"
#include "core/safe_file.h"
#include "core/spawn.h"
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

}  // namespace

nlohmann::json specs_to_json(const std::vector<ChildSpec>& specs) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& s : specs)
    j.push_back({{"name", s.name},
                 {"netns", s.netns},
                 {"argv", s.argv},
                 {"delay_ms", s.delay_ms},
                 {"hup_blocked", s.hup_blocked},
                 {"notify_ready", s.notify_ready},
                 {"in_process", s.in_process}});
  return j;
}

Result<std::vector<ChildSpec>> specs_from_json(const nlohmann::json& j) {
  try {
    std::vector<ChildSpec> out;
    for (const auto& s : j)
      out.push_back({s.at("name"), s.at("netns"), s.at("argv"), s.value("delay_ms", 0),
                     s.value("hup_blocked", false), s.value("notify_ready", false),
                     s.value("in_process", false)});
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

namespace {

// spawn_in_netns; `close_fds`: every fd of ours above stderr that is not close-on-exec is
// closed in the child (the supervisor's children: a daemon holds nothing of its starter's).
Result<int> spawn_child(const std::string& netns, const std::vector<std::string>& argv,
                        const std::string& owner, const std::string& log_path, bool hup_blocked,
                        UniqueFd* ready, bool close_fds) {
  if (argv.empty()) return fail("spawn in " + netns + ": empty command");
  UniqueFd ns(::open((paths::roots().netns + "/" + netns).c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns) return sys_fail("spawn in " + netns + ": open namespace");
  auto log = open_file(log_path, O_WRONLY | O_CREAT | O_APPEND);
  if (!log) return std::unexpected(with_context(log.error(), "spawn in " + netns));
  // The ready pipe: CLOEXEC on both ends here; the child keeps its write end across the exec.
  UniqueFd ready_r, ready_w;
  std::vector<std::string> add{std::string(kOwnerEnv) + "=" + owner};
  if (ready) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return sys_fail("spawn in " + netns + ": pipe");
    ready_r.reset(p[0]);
    ready_w.reset(p[1]);
    add.push_back(std::string(kReadyFdEnv) + "=" + std::to_string(ready_w.get()));
  }
  // core/spawn.h: no copy of the supervisor's memory, and it returns once the child runs its
  // program, whose environment carries the owner marker (a child reported running before its
  // exec could not be found by its marker: a race seen under load by the supervisor test).
  SpawnSpec spec{argv[0],    argv,       environment_with(add), ns.get(),          -1,
                 log->get(), log->get(), ready_w.get(),         /*new_group=*/true};
  spec.close_other_fds = close_fds;
  // No blocked signals but SIGHUP when `hup_blocked` (a SIGHUP before the program takes it
  // stays pending).
  sigset_t mask;
  sigemptyset(&mask);
  if (hup_blocked) sigaddset(&mask, SIGHUP);
  spec.mask = mask;
  auto pid = spawn_process(spec);
  if (!pid) return std::unexpected(with_context(pid.error(), "spawn in " + netns));
  if (ready) *ready = std::move(ready_r);
  return *pid;
}

}  // namespace

Result<int> spawn_in_netns(const std::string& netns, const std::vector<std::string>& argv,
                           const std::string& owner, const std::string& log_path, bool hup_blocked,
                           UniqueFd* ready) {
  return spawn_child(netns, argv, owner, log_path, hup_blocked, ready, false);
}

Result<int> fork_in_netns(const std::string& netns, const std::vector<std::string>& argv,
                          const std::string& log_path, bool hup_blocked, UniqueFd* ready,
                          const InProcessMain& main) {
  if (argv.empty()) return fail("start in " + netns + ": empty command");
  UniqueFd ns(::open((paths::roots().netns + "/" + netns).c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns) return sys_fail("start in " + netns + ": open namespace");
  auto log = open_file(log_path, O_WRONLY | O_CREAT | O_APPEND);
  if (!log) return std::unexpected(with_context(log.error(), "start in " + netns));
  UniqueFd ready_r, ready_w;
  if (ready) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return sys_fail("start in " + netns + ": pipe");
    ready_r.reset(p[0]);
    ready_w.reset(p[1]);
  }
  const std::string name = std::filesystem::path(argv[0]).filename().string().substr(0, 15);
  const pid_t pid = ::fork();
  if (pid < 0) return sys_fail("start in " + netns + ": fork");
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group, as an exec'd child's
    if (::setns(ns.get(), CLONE_NEWNET) != 0) {
      std::fprintf(stderr, "supervisor: enter %s: %s\n", netns.c_str(), std::strerror(errno));
      ::_exit(126);
    }
    ::dup2(log->get(), STDOUT_FILENO);
    ::dup2(log->get(), STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    // Only its ready pipe beyond stdio: not the supervisor's other children's pipes, logs or
    // namespace fds (an exec'd child loses them by O_CLOEXEC).
    int ready_fd = -1;
    if (ready_w) ready_fd = ::dup2(ready_w.get(), STDERR_FILENO + 1);
    ::close_range(ready_fd >= 0 ? ready_fd + 1 : STDERR_FILENO + 1, ~0U, 0);
    // The supervisor's handlers are not the child's; the mask as an exec'd child's.
    reset_signal_handlers();
    sigset_t mask;
    sigemptyset(&mask);
    if (hup_blocked) sigaddset(&mask, SIGHUP);
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    // Named as the program would be (comm: what `ps -e` and `top` show); its command line
    // stays the supervisor's (setting it needs CAP_SYS_RESOURCE, which the reference host's
    // root lacks).
    ::prctl(PR_SET_NAME, name.c_str());
    // Whatever happens in `main`, the child never returns into the supervisor's loop.
    int rc = 1;
    try {
      rc = main(argv, ready_fd);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
    } catch (...) {
      std::fprintf(stderr, "%s: unknown exception\n", name.c_str());
    }
    std::fflush(nullptr);
    ::_exit(rc);
  }
  ready_w.reset();
  if (ready) *ready = std::move(ready_r);
  return pid;
}

Status supervise(const std::vector<ChildSpec>& specs, const std::string& owner,
                 const SupervisorPaths& paths, const std::atomic<bool>& stop,
                 std::atomic<bool>* reload, const std::function<std::vector<ChildSpec>()>& more,
                 const InProcessMain& in_process) {
  // Stop and reload signals are taken only in the wait at the end of each turn (ppoll).
  sigset_t blocked, unblocked;
  sigemptyset(&blocked);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&blocked, sig);
  ::pthread_sigmask(SIG_BLOCK, &blocked, &unblocked);
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
            children.push_back({spec,
                                ChildState{spec.name},
                                now + int64_t{spec.delay_ms} * 1'000'000,
                                kBackoffFirstMs,
                                {}});
            changed = true;
          }
    }
    for (auto& c : children) {
      if (c.state.running || c.state.starting || c.state.broken || now < c.next_start_ns) continue;
      const std::string log = paths.logs + "/" + log_name(c.spec.name);
      UniqueFd* ready = c.spec.notify_ready ? &c.ready : nullptr;
      auto pid =
          c.spec.in_process && in_process
              ? fork_in_netns(c.spec.netns, c.spec.argv, log, c.spec.hup_blocked, ready, in_process)
              : spawn_child(c.spec.netns, c.spec.argv, owner, log, c.spec.hup_blocked, ready,
                            /*close_fds=*/true);
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
    // A signal (stop, reload) ends it too: they are blocked outside this wait, so one sent
    // just before it is not slept through (`up` hands a supervisor it started early its
    // children with a SIGHUP, and waits for them).
    std::vector<pollfd> waiting;
    for (const auto& c : children)
      if (c.state.starting && c.ready) waiting.push_back({c.ready.get(), POLLIN, 0});
    const timespec turn{0, 20'000'000};
    (void)::ppoll(waiting.data(), waiting.size(), &turn, &unblocked);
  }
  ::pthread_sigmask(SIG_SETMASK, &unblocked, nullptr);
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
constexpr int kStartPerChildMs = 20;  // await_children's bound grows by this per child

Result<int> launch_supervisor(const std::string& lab, const std::string& lab_dir,
                              const std::string& owner, const std::vector<ChildSpec>& specs) {
  TB_TRY(write_file(lab_dir + "/supervisor-spec.json", specs_to_json(specs).dump(1) + "\n"));
  std::filesystem::remove(lab_dir + "/supervisor.json");
  auto log = open_file(lab_dir + "/supervisor.log", O_WRONLY | O_CREAT | O_APPEND);
  if (!log) return std::unexpected(log.error());
  // A daemon in a session of its own, no signal blocked, the owner marker in its environment;
  // core/spawn.h: no copy of our memory. It is our child until we exit, then init's; it is
  // waited for here only when it ends before it took its children (give_children).
  SpawnSpec spec{"/proc/self/exe",
                 {"testbedctl", "supervise", lab},
                 environment_with({std::string(kOwnerEnv) + "=" + owner}),
                 -1,
                 -1,
                 log->get(),
                 log->get()};
  spec.new_session = true;
  spec.close_other_fds = true;
  sigset_t none;
  sigemptyset(&none);
  spec.mask = none;
  auto pid = spawn_process(spec);
  if (!pid) return std::unexpected(with_context(pid.error(), "start the lab supervisor"));
  return *pid;
}

Status await_children(const std::string& lab_dir, const std::vector<ChildSpec>& specs,
                      int wait_ms) {
  const std::string status_path = lab_dir + "/supervisor.json";
  // Each child gets wait_ms from its own first start: FRR's bgpd starts 2 s after zebra, which
  // left it 1 s under a flat 3 s (in the lab VM's emulated CPU it missed that).
  // And the supervisor starts its children one after another (~2.4 ms of CPU each on a quiet
  // host, ten times that under load): a 1,024-GPU lab's 131 under a flat 3 s failed its `up`
  // at load ~17 with its 127th stage not yet started (2026-12-05), so each child adds its share.
  int latest = 0;
  for (const auto& c : specs) latest = std::max(latest, c.delay_ms);
  wait_ms += latest + kStartPerChildMs * static_cast<int>(specs.size());
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

Status start_supervisor(const std::string& lab, const std::string& lab_dir,
                        const std::string& owner, const std::vector<ChildSpec>& specs,
                        int wait_ms) {
  TB_TRY(launch_supervisor(lab, lab_dir, owner, specs));
  return await_children(lab_dir, specs, wait_ms);
}

// How long give_children waits for a supervisor launched early to be ready for its SIGHUP
// (an exec of testbedctl: tens of ms; seconds on a host with every core busy).
constexpr int kTakeWaitMs = 5000;

Result<bool> offer_children(int pid, const std::string& lab_dir,
                            const std::vector<ChildSpec>& specs) {
  // Not reaped here if it has ended: give_children's waitpid must still see it end.
  int written = 0;
  std::ifstream(lab_dir + "/supervisor.pid") >> written;
  if (written != pid) return false;
  TB_TRY(write_file(lab_dir + "/supervisor-spec.json", specs_to_json(specs).dump(1) + "\n"));
  // An ended supervisor (a zombie until give_children reaps it) takes the signal harmlessly.
  if (::kill(pid, SIGHUP) != 0) return sys_fail("hand the lab supervisor its processes");
  return true;
}

Status give_children(int pid, const std::string& lab, const std::string& lab_dir,
                     const std::string& owner, const std::vector<ChildSpec>& specs, int wait_ms) {
  // Ready for SIGHUP once it has written its pid (cmd_supervise: after its handlers); before
  // that the signal would end it. Ended (our child: reaped here): a fresh one takes them.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kTakeWaitMs);
  for (;;) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid)
      return start_supervisor(lab, lab_dir, owner, specs, wait_ms);
    auto offered = offer_children(pid, lab_dir, specs);
    if (!offered) return std::unexpected(offered.error());
    if (*offered) break;
    if (std::chrono::steady_clock::now() >= deadline)
      return fail("the lab supervisor (pid " + std::to_string(pid) + ") did not start within " +
                  std::to_string(kTakeWaitMs) + " ms (see " + lab_dir + "/supervisor.log)");
    std::this_thread::sleep_for(std::chrono::milliseconds(kStartPollMs));
  }
  return await_children(lab_dir, specs, wait_ms);
}

}  // namespace tb::runner
