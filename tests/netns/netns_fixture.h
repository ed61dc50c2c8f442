// Shared pieces of the netns tier: a fixture that skips without root, hands out namespace names
// unique to this test process (tb-t<pid>-<tag>), and removes every one of them in TearDown even
// when the test failed; plus small helpers that run `ip`/`ping` to observe (never to build).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "apply/marker.h"
#include "apply/netlink_kernel.h"
#include "core/ipv4.h"
#include "netlink/netns.h"

namespace tb::testing {

// A literal prefix or address of a test (shared: a unity batch puts the tests in one unit).
inline Prefix pfx(const char* t) {
  return *parse_prefix(t);
}
inline Ipv4 ip(const char* t) {
  return *parse_ipv4(t);
}

// Runs argv with stdout/stderr sent to /dev/null; returns the exit status (or -1).
inline int run_quiet(std::vector<std::string> argv) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* null = std::fopen("/dev/null", "w");
    if (null) {
      dup2(fileno(null), 1);
      dup2(fileno(null), 2);
    }
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Output of a shell command (for `ip -n NS route show ...`).
inline std::string capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  pclose(p);
  return out;
}

inline bool ping(const std::string& netns, const std::string& addr) {
  return run_quiet({"ip", "netns", "exec", netns, "ping", "-c1", "-W1", addr}) == 0;
}

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: creates network namespaces";
    kernel_ = std::make_unique<apply::NetlinkKernel>();
  }

  void TearDown() override {
    kernel_.reset();  // drop our descriptors first, or they keep the namespaces alive
    for (const auto& n : names_) {
      EXPECT_TRUE(netlink::delete_named_netns(n).has_value()) << n;
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::path(apply::etc_netns_dir()) / n, ec);
    }
  }

  // "tb-t<pid>-<tag>", registered for removal before anything is created under it.
  std::string ns(const std::string& tag) {
    std::string n = "tb-t" + std::to_string(getpid()) + "-" + tag;
    names_.push_back(n);
    return n;
  }
  // Owner marker unique to this process and `lab`.
  static std::string marker(const std::string& lab) {
    return "testbedctl lab=t" + std::to_string(getpid()) + lab + " ";
  }

  // Namespaces `a` and `b` (node names "a" and "b", owner marker `mk`) joined by a veth, e0 at
  // each end, 198.18.0.0 and 198.18.0.1/31: the ops for apply().
  static std::vector<plan::Op> veth_pair(const std::string& a, const std::string& b,
                                         const std::string& mk) {
    return {plan::CreateNetns{a, "a", mk + "node=a"}, plan::CreateNetns{b, "b", mk + "node=b"},
            plan::CreateVeth{{a, "e0", mk + "a-b", ""}, {b, "e0", mk + "b-a", ""}, 1500},
            plan::AddAddr{a, "e0", *parse_prefix("198.18.0.0/31")},
            plan::AddAddr{b, "e0", *parse_prefix("198.18.0.1/31")}};
  }

  // Submits every op, then syncs; the first failure as text ("" when all went well).
  std::string apply(const std::vector<plan::Op>& ops) {
    for (const auto& op : ops)
      if (auto r = kernel_->submit(op); !r) return r.error().message;
    if (auto r = kernel_->sync(); !r) return r.error().message;
    return "";
  }

  bool exists(const std::string& name) const {
    return std::filesystem::exists(netlink::netns_path(name));
  }

  std::unique_ptr<apply::NetlinkKernel> kernel_;
  std::vector<std::string> names_;
};

}  // namespace tb::testing
