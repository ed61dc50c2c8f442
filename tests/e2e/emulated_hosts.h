// Emulated hosts for multi-host tests (issue 19): several "machines" on this one, each a network
// namespace holding its underlay port, with a mount namespace of its own in which /run/netns,
// /run/testbedctl (lab state), /etc/netns (hosts files) and /var/lib/testbedctl (results) are
// private tmpfs mounts, and a UTS namespace of its own whose hostname is the host's name (so a
// slurmd started there is that node: slurm_cluster.h). A `testbedctl` run in a host
// (EmulatedHosts::run) sees only what was built there, as on a separate machine: the same code
// path, no test-only switch in the product.
//
//   root namespace                 (nothing of the hosts is visible here but their namespaces)
//   tbmh<tag>-ul     the underlay switch: bridge "ul", one veth port per host, MTU 9000; with
//                    `controller`, the bridge itself has 198.19.254.254/24 (a cluster
//                    controller's address: slurmctld and srun run in this namespace)
//   tbmh<tag>-<h>    host h: "ul0" with 198.19.254.(1+i)/24 (i = the host's index), lo up;
//                    a holder process (sleep) inside it keeps its private mount and UTS
//                    namespaces, and with `clock_ahead_s` a time namespace of its own whose
//                    CLOCK_MONOTONIC runs that many seconds ahead of this machine's (as a
//                    separate machine's would: booted at another time)
//
// Every address is in 198.19.254.0/24, inside the benchmarking range and only inside these
// namespaces; every name starts with "tbmh<tag>", the owner of everything it makes. The
// destructor kills the holders (by pid) and deletes the namespaces it made; bounded waits only.
// Needs root, nsenter and unshare (util-linux). Not thread-safe: one test drives it.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "e2e_util.h"

namespace tb::e2e {

// `s` as one single-quoted shell word.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// scenarios/hz-bj.toml as lab `lab` in 198.18.0.0/16, with one [[host]] table per (name,
// underlay, what it holds: a TOML line such as regions = ["hz"]), written to `path`.
inline std::string hzbj_over_hosts(const std::string& lab, const std::string& path,
                                   const std::vector<std::array<std::string, 3>>& placement) {
  std::ifstream in(scenario("hz-bj.toml"));
  std::stringstream text;
  text << in.rdbuf();
  std::string s =
      std::regex_replace(text.str(), std::regex("name = \"hzbj\""), "name = \"" + lab + "\"");
  s = std::regex_replace(s, std::regex("address_space = \"198.18.0.0/15\""),
                         "address_space = \"198.18.0.0/16\"");
  for (const auto& [name, underlay, holds] : placement)
    s += "\n[[host]]\nname = \"" + name + "\"\nunderlay = \"" + underlay + "\"\n" + holds + "\n";
  std::ofstream(path) << s;
  return path;
}

class EmulatedHosts;
inline bool wait_converged(const EmulatedHosts& h, size_t i, const std::string& lab,
                           const std::string& from, const std::string& to, double below_ms,
                           std::string* last = nullptr);

class EmulatedHosts {
 public:
  // `tag`: a few characters unique to the test (a pid is added); `names`: the hosts (valid
  // hostnames); `controller`: give the switch namespace controller_address(); `clock_ahead_s`:
  // per host, how far its monotonic clock runs ahead (seconds; missing or 0: this machine's).
  EmulatedHosts(const std::string& tag, std::vector<std::string> names, bool controller = false,
                std::vector<int> clock_ahead_s = {})
      : prefix_("tbmh" + tag + std::to_string(::getpid() % 100000)),
        names_(std::move(names)),
        controller_(controller),
        ahead_(std::move(clock_ahead_s)) {
    ahead_.resize(names_.size(), 0);
    ok_ = build();
  }
  EmulatedHosts(const EmulatedHosts&) = delete;
  EmulatedHosts& operator=(const EmulatedHosts&) = delete;
  ~EmulatedHosts() { destroy(); }

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  // The namespace of host i and its underlay address.
  std::string netns(size_t i) const { return prefix_ + "-" + names_[i]; }
  std::string switch_netns() const { return prefix_ + "-ul"; }
  std::string underlay(size_t i) const { return "198.19.254." + std::to_string(1 + i); }
  // The switch namespace's own address on the underlay (with `controller`).
  std::string controller_address() const { return "198.19.254.254"; }
  size_t size() const { return names_.size(); }
  const std::string& name(size_t i) const { return names_[i]; }
  // The process that holds host i's namespaces: `nsenter -t holder(i) -n -m -u` enters the host.
  pid_t holder(size_t i) const { return holders_[i]; }
  // The prefix of every name this object makes ("tbmh<tag><pid>").
  const std::string& prefix() const { return prefix_; }

  // `cmd` (a shell command line) inside host i: its network, mount and UTS namespaces (and its
  // time namespace when its clock runs ahead).
  CmdResult run(size_t i, const std::string& cmd) const {
    return sh("nsenter -t " + std::to_string(holders_[i]) + " -n -m -u" + (ahead_[i] ? " -T" : "") +
              " -- sh -c " + shell_quote(cmd));
  }
  // `cmd` in the switch namespace (network only: the root's mounts and hostname).
  CmdResult run_switch(const std::string& cmd) const {
    return sh("nsenter --net=/run/netns/" + switch_netns() + " -- sh -c " + shell_quote(cmd));
  }
  // Processes in host i's mount namespace other than its holder and `except` (what `up` started
  // there and `down` must stop), as "pid comm".
  std::vector<std::string> processes(size_t i, const std::vector<pid_t>& except = {}) const {
    std::vector<std::string> out;
    std::error_code ec;
    const auto mine =
        std::filesystem::read_symlink("/proc/" + std::to_string(holders_[i]) + "/ns/mnt", ec);
    if (ec) return {"holder gone"};
    for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string pid = e.path().filename();
      if (pid.find_first_not_of("0123456789") != std::string::npos ||
          pid == std::to_string(holders_[i]) ||
          std::ranges::find(except, std::atoi(pid.c_str())) != except.end())
        continue;
      std::error_code e2;
      if (std::filesystem::read_symlink(e.path() / "ns/mnt", e2) != mine || e2) continue;
      std::ifstream comm(e.path() / "comm");
      std::string c;
      comm >> c;
      out.push_back(pid + " " + c);
    }
    return out;
  }
  // testbedctl inside host i.
  CmdResult testbedctl(size_t i, const std::string& args) const {
    return run(i, tbctl() + " " + args);
  }

 private:
  bool step(const std::string& cmd) {
    CmdResult r = sh(cmd);
    if (r.rc != 0 && error_.empty()) error_ = cmd + ": " + r.out;
    return r.rc == 0;
  }

  bool build() {
    if (!is_root()) return false;
    const std::string sw = switch_netns();
    made_.push_back(sw);
    if (!step("ip netns add " + sw) || !step("ip -n " + sw + " link set lo up") ||
        !step("ip -n " + sw + " link add ul mtu 9000 type bridge") ||
        !step("ip -n " + sw + " link set ul up"))
      return false;
    if (controller_ && !step("ip -n " + sw + " addr add " + controller_address() + "/24 dev ul"))
      return false;
    for (size_t i = 0; i < names_.size(); ++i) {
      const std::string h = netns(i), port = "p" + std::to_string(i);
      made_.push_back(h);
      if (!step("ip netns add " + h) || !step("ip -n " + h + " link set lo up") ||
          !step("ip -n " + sw + " link add " + port +
                " mtu 9000 type veth peer name ul0 mtu 9000 "
                "netns " +
                h) ||
          !step("ip -n " + sw + " link set " + port + " master ul up") ||
          !step("ip -n " + h + " addr add " + underlay(i) + "/24 dev ul0") ||
          !step("ip -n " + h + " link set ul0 up"))
        return false;
      // The holder: a private mount namespace (unshare's default propagation is private) with
      // its own tmpfs over each directory testbedctl keeps per-machine state in, a UTS
      // namespace named after the host, then sleep. nsenter and unshare exec, so $! is the
      // sleeping process itself.
      const std::string dirs = "/run/netns /run/testbedctl /etc/netns /var/lib/testbedctl";
      const std::string inner = "hostname " + shell_quote(names_[i]) + " && mkdir -p " + dirs +
                                " && for d in " + dirs + "; do mount -t tmpfs -o mode=0755 " +
                                prefix_ + " $d || exit 1; done && exec sleep 100000";
      const std::string time_ns =
          ahead_[i] ? " -T --monotonic " + std::to_string(ahead_[i]) : std::string();
      CmdResult r =
          sh("nsenter --net=/run/netns/" + h + " unshare -m -u" + time_ns +
             " --propagation private sh -c " + shell_quote(inner) + " >/dev/null 2>&1 & echo $!");
      const pid_t pid = static_cast<pid_t>(std::atoi(r.out.c_str()));
      if (pid <= 0) {
        error_ = "no holder for " + h + ": " + r.out;
        return false;
      }
      holders_.push_back(pid);
      // Ready once it sleeps (its mounts are made); at most 10 s.
      bool ready = false;
      for (int t = 0; t < 200 && !ready; ++t) {
        std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
        std::string c;
        if (!(comm >> c)) break;  // it died: a mount failed
        ready = c == "sleep";
        if (!ready) ::usleep(50'000);
      }
      if (!ready) {
        error_ = "holder of " + h + " did not come up (hostname or mounts failed?)";
        return false;
      }
    }
    return true;
  }

  void destroy() {
    for (pid_t pid : holders_) {
      ::kill(pid, SIGKILL);
      for (int t = 0; t < 100 && std::filesystem::exists("/proc/" + std::to_string(pid)); ++t)
        ::usleep(20'000);
    }
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) sh("ip netns del " + *it);
  }

  std::string prefix_;
  std::vector<std::string> names_;
  bool controller_ = false;  // the switch namespace has controller_address()
  std::vector<int> ahead_;   // per host: its monotonic clock's offset (s)
  std::vector<pid_t> holders_;
  std::vector<std::string> made_;  // namespaces this object made, deleted in reverse
  bool ok_ = false;
  std::string error_;
};

// Routing between hosts converges a few seconds after the last host's `up`: the regions learn
// each other's routes over BGP sessions across the tunnels (connect retry 1 s), and `up` waits
// only for the routers on its own host (it cannot wait for a host not up yet). A test that needs
// the regions to reach each other over the primary link waits for exactly that, bounded (about
// 30 s), instead of racing BGP: GPU `from` (on host i) pings `to` by name and the reply comes
// within `below_ms` (the primary WAN link's round trip; over the backup alone it is slower).
// `last`: the last ping's output, for a failure message.
inline bool wait_converged(const EmulatedHosts& h, size_t i, const std::string& lab,
                           const std::string& from, const std::string& to, double below_ms,
                           std::string* last) {
  for (int t = 0; t < 40; ++t) {
    CmdResult r = h.testbedctl(i, "exec " + lab + " " + from + " -- ping -n -c1 -W1 " + to);
    if (last) *last = r.out;
    const size_t at = r.out.find("time=");
    if (r.rc == 0 && at != std::string::npos && std::stod(r.out.substr(at + 5)) < below_ms)
      return true;
    ::usleep(500'000);
  }
  return false;
}

}  // namespace tb::e2e
