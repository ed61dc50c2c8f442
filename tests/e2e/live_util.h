// Helpers for the e2e tests of verbs on live labs (verbs_live_test.cc, verbs_live_link_test.cc):
// a scratch directory, a copy of a shipped scenario under another lab name, bounded polling, the
// lab's events, ping between nodes, and a child process that is killed however the test ends.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "e2e_util.h"

namespace tb::e2e {

// A temporary directory removed when the test ends, however it ends.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    char t[] = "/tmp/tb-e2e-live-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A shipped scenario's text with its [lab] name replaced by `lab` (and `extra` appended),
// written to `dir`/<lab>.toml.
inline std::string scenario_named(const ScratchDir& dir, const std::string& shipped,
                                  const std::string& lab, const std::string& extra = "") {
  std::string text = read_text(scenario(shipped));
  const auto at = text.find("name = \"", text.find("[lab]"));
  const auto end = text.find('"', at + 8);
  text.replace(at, end + 1 - at, "name = \"" + lab + "\"");
  const std::string path = dir.file(lab + ".toml");
  std::ofstream(path) << text << extra;
  return path;
}

// Polls `done` every 50 ms until it holds or `seconds` pass; returns its last answer.
inline bool wait_until(const std::function<bool()>& done, double seconds = 10) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

// The lab's events.jsonl, every line or those whose "event" is `event`.
inline std::vector<nlohmann::json> lab_events(const std::string& lab,
                                              const std::string& event = "") {
  std::vector<nlohmann::json> out;
  std::ifstream in("/run/testbedctl/" + lab + "/events.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) {
      out.push_back(nlohmann::json{{"unparsed", line}});
      continue;
    }
    if (event.empty() || j.value("event", "") == event) out.push_back(j);
  }
  return out;
}

// Ping from `node` to `target` (a hosts name): true when every echo came back.
inline bool reaches(const std::string& lab, const std::string& node, const std::string& target) {
  return testbedctl("exec " + lab + " " + node + " -- ping -c 3 -i 0.1 -W 1 " + target).rc == 0;
}
// True when not one echo came back.
inline bool unreachable(const std::string& lab, const std::string& node,
                        const std::string& target) {
  return testbedctl("exec " + lab + " " + node + " -- ping -c 3 -i 0.1 -W 1 " + target).rc == 1;
}

// `tc -n NETNS qdisc show dev IFNAME`.
inline std::string qdiscs(const std::string& netns, const std::string& ifname) {
  return sh("tc -n " + netns + " qdisc show dev " + ifname).out;
}

// testbedctl started with fork/exec (its pid is its own, not a shell's), stdout and stderr to
// `log`; killed (SIGKILL) and reaped when this goes out of scope if it still runs.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::string& log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::freopen(log.c_str(), "w", stdout);
      ::dup2(::fileno(stdout), 2);
      std::vector<char*> argv{const_cast<char*>(TB_TESTBEDCTL)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(TB_TESTBEDCTL, argv.data());
      ::_exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // Waits up to `seconds` for it to exit; its wait status, or nullopt while it still runs.
  std::optional<int> wait(double seconds) {
    const bool done = wait_until(
        [&] {
          if (!exited_) exited_ = ::waitpid(pid_, &status_, WNOHANG) == pid_;
          return exited_;
        },
        seconds);
    if (!done) return std::nullopt;
    return status_;
  }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

// The supervisor's entry for one child of the lab ("stage dc/tr"), as `status --json` lists it;
// null when there is none.
inline nlohmann::json stage_of(const std::string& lab, const std::string& name) {
  const nlohmann::json st =
      status_json(lab);  // held: a range-for over a temporary's member dangles
  if (!st.is_object() || !st["backends"].contains("stages")) return {};
  for (const auto& s : st["backends"]["stages"])
    if (s["name"] == name) return s;
  return {};
}

// Kills the named stage each time it is back (checking the pid is a tb-delayd) until the
// supervisor gives it up (8 deaths within a minute, runner/supervisor.h). True once it is
// broken, false after `seconds`.
inline bool kill_stage_until_broken(const std::string& lab, const std::string& name,
                                    double seconds = 40) {
  int killed = 0;
  return wait_until(
      [&] {
        const nlohmann::json s = stage_of(lab, name);
        if (s.is_null()) return false;
        if (s["broken"].get<bool>()) return true;
        const int pid = s["pid"];
        if (s["running"].get<bool>() && pid != killed &&
            read_text("/proc/" + std::to_string(pid) + "/comm") == "tb-delayd\n") {
          ::kill(pid, SIGKILL);
          killed = pid;
        }
        return false;
      },
      seconds);
}

}  // namespace tb::e2e
