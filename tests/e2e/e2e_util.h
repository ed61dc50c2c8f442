// Helpers for end-to-end tests: run the testbedctl binary and shell commands, read lab state,
// and a guard that takes a lab down however the test ends.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace tb::e2e {

struct CmdResult {
  int rc = -1;
  std::string out;  // stdout and stderr together
};

inline CmdResult sh(const std::string& cmd) {
  CmdResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline std::string tbctl() {
  return TB_TESTBEDCTL;
}
inline std::string scenario(const std::string& name) {
  return std::string(TB_SOURCE_DIR) + "/scenarios/" + name;
}
inline CmdResult testbedctl(const std::string& args) {
  return sh(tbctl() + " " + args);
}

// A lab name unique to this test process: prefix + pid digits, at most 8 characters.
inline std::string unique_lab(const std::string& prefix) {
  std::string digits = std::to_string(::getpid() % 100000);
  return (prefix + digits).substr(0, 8);
}

// Namespaces whose loopback alias carries lab's owner marker (read with iproute2, the way a
// user would check).
inline std::vector<std::string> marked_netns(const std::string& lab) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
    const std::string ns = e.path().filename();
    CmdResult r = sh("ip -n " + ns + " -o link show lo");
    if (r.out.find("alias testbedctl lab=" + lab + " ") != std::string::npos) out.push_back(ns);
  }
  return out;
}

inline bool is_root() {
  return ::geteuid() == 0;
}

// Takes the lab down when the test ends, passed or failed.
class LabGuard {
 public:
  explicit LabGuard(std::string lab) : lab_(std::move(lab)) {}
  ~LabGuard() {
    testbedctl("down " + lab_);
    testbedctl("clean " + lab_);
  }
  const std::string& lab() const { return lab_; }

 private:
  std::string lab_;
};

inline nlohmann::json status_json(const std::string& lab) {
  CmdResult r = testbedctl("status " + lab + " --json");
  if (r.rc != 0) return {};
  return nlohmann::json::parse(r.out, nullptr, false);
}

}  // namespace tb::e2e

#define TB_REQUIRE_ROOT() \
  if (!::tb::e2e::is_root()) GTEST_SKIP() << "needs root: creates network namespaces"
