#include "core/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace tb {

std::vector<int> owned_processes(const std::string& owner, bool prefix) {
  const std::string want = std::string(kOwnerEnv) + "=" + owner;
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(e.path() / "environ", std::ios::binary);
    std::string var;
    while (std::getline(in, var, '\0'))
      if (var == want || (prefix && var.starts_with(want))) {
        out.push_back(std::stoi(name));
        break;
      }
  }
  return out;
}

void terminate(const std::vector<int>& pids, int grace_ms) {
  await_terminated(pids, send_terminate(pids), grace_ms);
}

int64_t send_terminate(const std::vector<int>& pids) {
  for (int pid : pids) ::kill(pid, SIGTERM);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void await_terminated(const std::vector<int>& pids, int64_t sent_ns, int grace_ms) {
  const auto deadline = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(sent_ns)) +
                        std::chrono::milliseconds(grace_ms);
  auto alive = [](int pid) {
    int st;
    if (::waitpid(pid, &st, WNOHANG) == pid) return false;  // our child, now reaped
    if (::kill(pid, 0) != 0) return false;
    // A zombie has exited; whoever its parent is (init, for a daemon) reaps it in its time.
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
  };
  while (std::chrono::steady_clock::now() < deadline &&
         std::ranges::any_of(pids, [&](int p) { return alive(p); }))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  for (int pid : pids)
    if (alive(pid)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
}

Result<std::string> find_companion(const std::string& name, const char* env_var) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto p = self.parent_path() / name;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  if (const char* env = std::getenv(env_var); env && ::access(env, X_OK) == 0)
    return std::string(env);
  if (const char* path = std::getenv("PATH")) {
    std::istringstream in(path);
    for (std::string dir; std::getline(in, dir, ':');) {
      const auto p = fs::path(dir) / name;
      if (!dir.empty() && ::access(p.c_str(), X_OK) == 0) return fs::absolute(p).string();
    }
  }
  return bad_input(name + " not found next to testbedctl, in $" + env_var +
                   " or on PATH (it is built and installed with testbedctl)");
}

}  // namespace tb
