// Helpers for end-to-end tests: run the testbedctl binary and shell commands, read lab state,
// and a guard that takes a lab down however the test ends.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tb::e2e {

struct CmdResult {
  int rc = -1;
  std::string out;  // stdout and stderr together
};

// With TB_E2E_TRACE set to a file, each command's wall time, exit status and the test it ran in
// are appended to it ("12.345 s rc 0 Suite.Test: cmd"): where a slow test spends its time.
inline void trace_command(const std::string& cmd, double seconds, int rc) {
  const char* path = std::getenv("TB_E2E_TRACE");
  if (!path || !*path) return;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::ofstream(path, std::ios::app)
      << std::fixed << std::setprecision(3) << seconds << " s rc " << rc << " "
      << (info ? std::string(info->test_suite_name()) + "." + info->name() : std::string("-"))
      << ": " << cmd.substr(0, 300) << "\n";
}

inline CmdResult sh(const std::string& cmd) {
  CmdResult r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  trace_command(cmd, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                r.rc);
  return r;
}

inline std::string tbctl() {
  return TB_TESTBEDCTL;
}
inline std::string scenario(const std::string& name) {
  return std::string(TB_SOURCE_DIR) + "/scenarios/" + name;
}
// scenarios/mini.toml with a blackhole and a link-down on its timeline (the Run.* tests' and the
// rootless run's scenario, before their own [expect]).
inline std::string mini_with_two_faults() {
  std::ifstream in(scenario("mini.toml"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  return text + R"(
[[fault]]
at = "1500ms"
kind = "blackhole"
a = "dc/s0/g0"
b = "dc/tor0"
for = "800ms"

[[fault]]
at = "3s"
kind = "link-down"
a = "dc/s1/g1"
b = "dc/tor0"
for = "800ms"
)";
}
inline CmdResult testbedctl(const std::string& args) {
  return sh(tbctl() + " " + args);
}

// Whether `needle` occurs in `haystack`.
inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The namespace of a lab's node: "tb-<lab>-<node with '/' as '-'>" (scenario/names.h's rule).
inline std::string ns(const std::string& lab, const std::string& node) {
  std::string n = node;
  std::replace(n.begin(), n.end(), '/', '-');
  return "tb-" + lab + "-" + n;
}

// A lab name unique to this test process: prefix + pid digits, at most 8 characters.
inline std::string unique_lab(const std::string& prefix) {
  std::string digits = std::to_string(::getpid() % 100000);
  return (prefix + digits).substr(0, 8);
}

// The loopback alias of the namespace file `path` ("" when it has none or cannot be read),
// asked over rtnetlink from a socket made inside it. Called on a thread of its own (setns
// changes the calling thread's namespace).
inline std::string loopback_alias_in(const std::string& path) {
  const int ns = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns < 0) return "";
  const bool joined = ::setns(ns, CLONE_NEWNET) == 0;
  ::close(ns);
  if (!joined) return "";
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return "";
  struct {
    nlmsghdr h;
    ifinfomsg i;
  } req{};
  req.h.nlmsg_len = sizeof req;
  req.h.nlmsg_type = RTM_GETLINK;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.i.ifi_family = AF_UNSPEC;
  req.i.ifi_index = 1;  // lo
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string alias;
  std::vector<char> buf(32768);
  if (::send(fd, &req, sizeof req, 0) == static_cast<ssize_t>(sizeof req)) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    auto* h = reinterpret_cast<nlmsghdr*>(buf.data());
    if (n > 0 && NLMSG_OK(h, static_cast<unsigned>(n)) && h->nlmsg_type == RTM_NEWLINK) {
      auto* a = IFLA_RTA(static_cast<ifinfomsg*>(NLMSG_DATA(h)));
      int len = static_cast<int>(IFLA_PAYLOAD(h));
      for (; RTA_OK(a, len); a = RTA_NEXT(a, len))
        if (a->rta_type == IFLA_IFALIAS)
          alias.assign(static_cast<const char*>(RTA_DATA(a)),
                       strnlen(static_cast<const char*>(RTA_DATA(a)), RTA_PAYLOAD(a)));
    }
  }
  ::close(fd);
  return alias;
}

// Namespaces whose loopback alias carries lab's owner marker: every namespace on the host is
// asked (not only those named for the lab: a namespace misnamed by a bug must show too), over
// rtnetlink from a thread that joins each in turn, about 0.1 ms each. Reading them with
// iproute2 cost 10 ms each (a process per namespace), tens of seconds a call on a shared host
// holding thousands of other labs' namespaces.
inline std::vector<std::string> marked_netns(const std::string& lab) {
  std::vector<std::string> out;
  const std::string want = "testbedctl lab=" + lab + " ";
  std::thread asker([&] {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
      const std::string alias = loopback_alias_in(e.path().string());
      if (alias.starts_with(want)) out.push_back(e.path().filename().string());
    }
  });
  asker.join();
  std::sort(out.begin(), out.end());
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
  if (r.rc != 0 && r.rc != 1) return {};  // 1: read, but a stage or daemon is down
  return nlohmann::json::parse(r.out, nullptr, false);
}

// verify --json's classes in a few lines, one per class and one per check that did not pass
// ("class result [stall]" / "  check verdict achieved in [low, high]: reason"): what a failure
// message shows first, as CI's log keeps only a few hundred lines of the whole document.
inline std::string verify_digest(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("classes")) return "(no verify document)\n";
  std::string s;
  for (const auto& c : j["classes"]) {
    s += c.value("class", "?") + " " + c.value("result", "?");
    if (c.value("readings", 1) > 1)
      s += " after " + std::to_string(c.value("readings", 1)) + " readings";
    if (!c.value("stall", "").empty()) s += " [host stalled: " + c.value("stall", "") + "]";
    s += "\n";
    for (const auto& k : c.value("checks", nlohmann::json::array()))
      if (k.value("verdict", "") != "pass")
        s += "  " + k.value("check", "?") + " " + k.value("verdict", "?") + " " +
             (k["achieved"].is_null() ? "-" : k["achieved"].dump()) + " in [" + k["low"].dump() +
             ", " + k["high"].dump() + "]: " + k.value("reason", "") + "\n";
    for (const auto& e : c["measurement"].value("errors", nlohmann::json::array()))
      s += "  error: " + e.dump() + "\n";
  }
  return s;
}

// A testbedctl running in the background as this test's own child: its pid is kept, and the
// destructor interrupts it (SIGINT, as Ctrl-C would), waits up to 10 s, then SIGKILLs and
// reaps it, so none outlives the test however the test ends. Output goes to `out`.
class Background {
 public:
  Background(const std::string& args, const std::string& out = "/dev/null",
             const std::string& env = "") {
    std::vector<std::string> words{TB_TESTBEDCTL};
    std::istringstream in(args);
    for (std::string w; in >> w;) words.push_back(w);
    pid_ = ::fork();
    if (pid_ == 0) {
      if (!env.empty()) ::putenv(const_cast<char*>(env.c_str()));
      if (!::freopen(out.c_str(), "w", stdout)) ::_exit(126);
      ::dup2(::fileno(stdout), 2);
      std::vector<char*> argv;
      for (auto& w : words) argv.push_back(w.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  ~Background() {
    if (pid_ <= 0 || done_) return;
    ::kill(pid_, SIGINT);
    if (wait(10) < 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // The exit code (128 + signal when killed), or -1 while it still runs after `seconds`: a
  // bound on a hang, not a timing claim.
  int wait(int seconds = 30) {
    for (int i = 0; i < seconds * 20 && !done_; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        done_ = true;
        rc_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      ::usleep(50'000);
    }
    return done_ ? rc_ : -1;
  }
  // Ctrl-C, as a user at the terminal would; returns the exit code.
  int interrupt(int seconds = 30) {
    if (!done_) ::kill(pid_, SIGINT);
    return wait(seconds);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool done_ = false;
  int rc_ = -1;
};

}  // namespace tb::e2e

#define TB_REQUIRE_ROOT() \
  if (!::tb::e2e::is_root()) GTEST_SKIP() << "needs root: creates network namespaces"

namespace tb::e2e {

// One mini lab shared by a suite's tests (`up` costs seconds), with a results directory of its
// own; both go when the suite ends. `Suite` (the deriving fixture) keeps the statics per suite.
// The fixture's SetUpTestSuite calls up_shared; a test fails at once when the lab did not come up.
template <class Suite>
class SharedMiniLab : public testing::Test {
 protected:
  static void up_shared(const std::string& prefix, const std::string& what) {
    if (!is_root()) return;
    std::string t = "/tmp/tb-e2e-" + what + "-XXXXXX";
    if (::mkdtemp(t.data()) == nullptr) return;
    results_ = t;
    lab_ = unique_lab(prefix);
    guard_ = new LabGuard(lab_);
    auto r = testbedctl("up " + scenario("mini.toml") + " --name " + lab_);
    up_ok_ = r.rc == 0;
    if (!up_ok_) std::fprintf(stderr, "up failed: %s\n", r.out.c_str());
  }
  static void TearDownTestSuite() {
    delete guard_;  // down + clean
    guard_ = nullptr;
    if (!results_.empty()) std::filesystem::remove_all(results_);
  }
  void SetUp() override {
    TB_REQUIRE_ROOT();
    ASSERT_TRUE(up_ok_) << "mini lab did not come up";
  }
  static inline std::string results_, lab_;
  static inline LabGuard* guard_ = nullptr;
  static inline bool up_ok_ = false;
};

}  // namespace tb::e2e
