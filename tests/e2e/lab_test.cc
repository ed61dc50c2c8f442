// End to end, as root: the testbedctl binary on the shipped scenarios and on generated ones.
// Every test takes its lab down however it ends (LabGuard).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <thread>

#include "core/ipv4.h"
#include "e2e_util.h"
#include "lab/state.h"

namespace tb::e2e {
namespace {

using nlohmann::json;

std::string addr_of(const json& node, const std::string& role) {
  std::string a = node["addrs"].value(role, "");
  return a.substr(0, a.find('/'));
}

std::string host(const std::string& node) {
  std::string s = node;
  for (char& c : s)
    if (c == '/') c = '-';
  return s;
}

std::vector<json> gpus(const json& st) {
  std::vector<json> out;
  for (const auto& n : st["nodes"])
    if (n["kind"] == "gpu") out.push_back(n);
  return out;
}

// From every GPU, resolve every other GPU by name, check the address is the intended tier's
// and that the route leaves by the intended interface, and ping it.
void expect_full_reachability(const std::string& lab) {
  json st = status_json(lab);
  ASSERT_FALSE(st.is_null());
  auto all = gpus(st);
  ASSERT_GE(all.size(), 2u);
  for (const auto& src : all) {
    std::string script;
    std::vector<std::pair<std::string, std::string>> expect;  // (addr, dev prefix)
    for (const auto& dst : all) {
      if (dst["name"] == src["name"]) continue;
      const bool same_region = dst["region"] == src["region"];
      const std::string s = src["name"], d = dst["name"];
      const bool same_server =
          same_region && s.substr(0, s.rfind('/')) == d.substr(0, d.rfind('/'));
      std::string addr = same_server || !same_region ? addr_of(dst, "nvl") : addr_of(dst, "rail");
      expect.emplace_back(addr, same_region && !same_server ? "rail" : "nvl");
      // Numbered, in the background: every destination at once (sorted back below); one ping a
      // line, so no two lines interleave.
      script += "( echo \"" + std::to_string(expect.size()) + " $(getent hosts " + host(d) +
                " | cut -d' ' -f1) $(ip -o route get " + addr +
                " | grep -o 'dev [a-z]*' ) $( (ping -c1 -W2 -q " + host(d) +
                " || ping -c1 -W2 -q " + host(d) + ") >/dev/null && echo ok || echo FAIL)\" ) & ";
    }
    // One ping, and a second only when the first got no answer within 2 s: reachability is
    // the property, and once (2026-12-04, the e2e tests two at a time beside two builds, load 8)
    // MiniUpReachDown failed here or nearby with nothing kept to say which. All destinations are
    // pinged at once (one after another, hz-bj's 240 pairs took ~30 s of the e2e tier).
    // The script runs inside the node; a file keeps the root shell from expanding it.
    const std::string file = "/tmp/tb-e2e-reach-" + std::to_string(::getpid()) + ".sh";
    std::ofstream(file) << "{ " << script << "wait; } | sort -n | cut -d' ' -f2-\n";
    CmdResult r =
        testbedctl("exec " + lab + " " + src["name"].get<std::string>() + " -- sh " + file);
    std::filesystem::remove(file);
    ASSERT_EQ(r.rc, 0) << r.out;
    std::istringstream lines(r.out);
    for (const auto& [addr, dev] : expect) {
      std::string got_addr, dev_word, got_dev, result;
      lines >> got_addr >> dev_word >> got_dev >> result;
      EXPECT_EQ(got_addr, addr) << "from " << src["name"];
      EXPECT_TRUE(got_dev.starts_with(dev))
          << "from " << src["name"] << " to " << addr << " via " << got_dev << ", wanted " << dev;
      EXPECT_EQ(result, "ok") << "from " << src["name"] << " ping " << addr;
    }
  }
}

void expect_gone(const std::string& lab, const std::vector<std::string>& netns) {
  EXPECT_TRUE(marked_netns(lab).empty());
  for (const auto& ns : netns) {
    EXPECT_FALSE(std::filesystem::exists("/run/netns/" + ns)) << ns;
    EXPECT_FALSE(std::filesystem::exists("/etc/netns/" + ns)) << ns;
  }
  EXPECT_FALSE(std::filesystem::exists("/run/testbedctl/" + lab));
}

std::vector<std::string> netns_of(const json& st) {
  std::vector<std::string> out;
  for (const auto& n : st["nodes"]) out.push_back(n["netns"]);
  return out;
}

// A generated single-region scenario of `servers` x 8 GPUs.
std::string big_scenario(const std::string& dir, int servers) {
  std::string path = dir + "/big.toml";
  std::ofstream(path) << "[lab]\nname = \"big\"\n[[region]]\nname = \"dc\"\nservers = " << servers
                      << "\ngpus_per_server = 8\nscale_up = \"nvlink\"\nrail = \"hpn\"\n"
                         "spines = 2\nfrontend = \"vpc\"\n";
  return path;
}

TEST(Lab, MiniUpReachDown) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("em"));
  CmdResult up = testbedctl("up " + scenario("mini.toml") + " --name " + g.lab());
  ASSERT_EQ(up.rc, 0) << up.out;
  json st = status_json(g.lab());
  ASSERT_FALSE(st.is_null());
  for (const auto& l : st["links"]) EXPECT_EQ(l["state"], "up") << l.dump();
  expect_full_reachability(g.lab());
  // Every namespace and every interface carries the owner marker.
  EXPECT_EQ(marked_netns(g.lab()).size(), st["nodes"].size());
  for (const auto& ns : netns_of(st)) {
    // stderr apart: ip names each veth peer's namespace by asking the kernel about every file in
    // /run/netns, and one another test was removing right then answered "Error: Peer netns
    // reference is invalid" (rtnl_net_getid) on a line of its own (the suite, 2026-12-05).
    CmdResult links = sh("(ip -n " + ns + " -o link show 2>/dev/null)");
    std::istringstream in(links.out);
    for (std::string line; std::getline(in, line);)
      EXPECT_NE(line.find("alias testbedctl lab=" + g.lab() + " "), std::string::npos) << line;
  }
  CmdResult down = testbedctl("down " + g.lab());
  ASSERT_EQ(down.rc, 0) << down.out;
  expect_gone(g.lab(), netns_of(st));
  EXPECT_EQ(testbedctl("down " + g.lab()).rc, 0) << "down must be idempotent";
  EXPECT_EQ(testbedctl("status " + g.lab()).rc, 2);
}

TEST(Lab, HzBjEveryGpuReachesEveryOtherOverItsTier) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("eh"));
  CmdResult up = testbedctl("up " + scenario("hz-bj.toml") + " --name " + g.lab());
  ASSERT_EQ(up.rc, 0) << up.out;
  expect_full_reachability(g.lab());
  json st = status_json(g.lab());
  ASSERT_EQ(testbedctl("down " + g.lab()).rc, 0);
  expect_gone(g.lab(), netns_of(st));
}

TEST(Lab, SecondUpOfTheSameLabIsRefused) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("er"));
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
  CmdResult again = testbedctl("up " + scenario("mini.toml") + " --name " + g.lab());
  EXPECT_EQ(again.rc, 2) << again.out;
  EXPECT_NE(again.out.find("already up"), std::string::npos) << again.out;
}

TEST(Lab, TwoLabsAtOnceDoNotInterfere) {
  TB_REQUIRE_ROOT();
  LabGuard a(unique_lab("ea")), b(unique_lab("eb"));
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + a.lab()).rc, 0);
  ASSERT_EQ(testbedctl("up " + scenario("hz-bj.toml") + " --name " + b.lab()).rc, 0);
  json sa = status_json(a.lab());
  ASSERT_EQ(testbedctl("down " + a.lab()).rc, 0);
  expect_gone(a.lab(), netns_of(sa));
  expect_full_reachability(b.lab());
}

TEST(Lab, MidApplyFailureRollsBackAndLeavesForeignObjectsAlone) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("ef"));
  // A namespace testbedctl did not make, named like one the plan makes late.
  CmdResult plan = testbedctl("plan " + scenario("mini.toml") + " --format json");
  ASSERT_EQ(plan.rc, 0);
  json p = json::parse(plan.out);
  std::string last_ns;
  for (const auto& n : p["topology"]["nodes"]) last_ns = n["netns"];
  last_ns.replace(3, 4, g.lab());  // tb-mini-... -> tb-<lab>-...
  ASSERT_EQ(sh("ip netns add " + last_ns).rc, 0);
  struct Del {
    std::string ns;
    ~Del() { sh("ip netns del " + ns); }
  } del{last_ns};
  CmdResult up = testbedctl("up " + scenario("mini.toml") + " --name " + g.lab());
  EXPECT_EQ(up.rc, 1) << up.out;
  EXPECT_NE(up.out.find("File exists"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find("removed"), std::string::npos) << up.out;
  EXPECT_TRUE(marked_netns(g.lab()).empty());
  EXPECT_TRUE(std::filesystem::exists("/run/netns/" + last_ns)) << "foreign namespace deleted";
  EXPECT_FALSE(std::filesystem::exists("/run/testbedctl/" + g.lab()));
}

// Starts `up` in the background and waits until it has made at least `n` namespaces.
// Entries under /run/netns named for `lab` (a namespace is named there before `up` marks it).
size_t named_netns(const std::string& lab) {
  size_t count = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec))
    count += e.path().filename().string().starts_with("tb-" + lab + "-");
  return count;
}

pid_t start_up_and_wait(const std::string& path, const std::string& lab, size_t n) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::freopen("/dev/null", "w", stdout);
    ::execl(TB_TESTBEDCTL, TB_TESTBEDCTL, "up", path.c_str(), "--name", lab.c_str(), nullptr);
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (named_netns(lab) >= n) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return pid;
}

// `clean --all` removes every lab's namespaces: on a host with labs this test did not make it
// would take them too, so it runs only where there are none (CI's machines).
bool other_labs_present() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec))
    if (e.path().filename().string().starts_with("tb-")) return true;
  return false;
}

TEST(Lab, CleanAllTakesEachLabsLockAndLeavesABusyLabAlone) {
  TB_REQUIRE_ROOT();
  if (other_labs_present())
    GTEST_SKIP() << "labs this test did not make are up; clean --all would remove them";
  LabGuard a(unique_lab("ca")), b(unique_lab("cb"));
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + a.lab()).rc, 0);
  ASSERT_EQ(testbedctl("up " + scenario("hz-bj.toml") + " --name " + b.lab()).rc, 0);
  const size_t a_netns = marked_netns(a.lab()).size();
  {
    // What an `up` still building, or a `link set`, holds while it works on the lab.
    auto lock = lab::LabLock::acquire(a.lab());
    ASSERT_TRUE(lock) << lock.error().message;
    CmdResult r = testbedctl("clean --all");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("left lab(s) " + a.lab() + " alone"), std::string::npos) << r.out;
    EXPECT_EQ(marked_netns(a.lab()).size(), a_netns) << "clean --all touched a locked lab";
    EXPECT_TRUE(marked_netns(b.lab()).empty()) << "clean --all left an unlocked lab";
  }
  EXPECT_EQ(status_json(a.lab())["phase"], "up");
  CmdResult r = testbedctl("clean --all");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(marked_netns(a.lab()).empty());
  EXPECT_FALSE(std::filesystem::exists("/run/testbedctl/" + a.lab()));
}

TEST(Lab, KillDashNineDuringUpThenCleanLeavesNothing) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("ek"));
  auto dir = std::filesystem::temp_directory_path() / ("tb-e2e-" + g.lab());
  std::filesystem::create_directories(dir);
  pid_t pid = start_up_and_wait(big_scenario(dir, 32), g.lab(), 30);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  // The kill landed while up was still working (it did not exit on its own first), with part of
  // the lab built: the leftovers clean must find. Counted by name, as the wait above counted: the
  // newest namespace may not carry its marker yet, and clean must remove that one too.
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "up ended before the kill; use a larger lab";
  EXPECT_GE(named_netns(g.lab()), 30u);
  CmdResult clean = testbedctl("clean " + g.lab());
  EXPECT_EQ(clean.rc, 0) << clean.out;
  EXPECT_TRUE(marked_netns(g.lab()).empty());
  EXPECT_EQ(named_netns(g.lab()), 0u) << "a namespace named for the lab is left in /run/netns";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/etc/netns", ec))
    EXPECT_FALSE(e.path().filename().string().starts_with("tb-" + g.lab() + "-")) << e.path();
  EXPECT_FALSE(std::filesystem::exists("/run/testbedctl/" + g.lab()));
  std::filesystem::remove_all(dir);
}

TEST(Lab, UpRacingCleanAllEndsWholeOrGoneNeverHalfBuilt) {
  TB_REQUIRE_ROOT();
  if (other_labs_present())
    GTEST_SKIP() << "labs this test did not make are up; clean --all would remove them";
  LabGuard g(unique_lab("er"));
  const size_t want = 43;  // hz-bj's namespaces
  pid_t pid = start_up_and_wait(scenario("hz-bj.toml"), g.lab(), 5);
  CmdResult clean = testbedctl("clean --all");
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  // The up holds its lab's lock from before its first namespace to its end, so clean --all
  // leaves the lab alone and says so; should the up have finished first, clean takes it whole.
  EXPECT_EQ(WEXITSTATUS(status), 0) << "clean --all broke an up in progress: " << clean.out;
  const size_t left = marked_netns(g.lab()).size();
  if (clean.rc == 1) {
    EXPECT_NE(clean.out.find("left lab(s) " + g.lab() + " alone"), std::string::npos) << clean.out;
    EXPECT_EQ(left, want);
    EXPECT_EQ(status_json(g.lab())["phase"], "up");
  } else {
    EXPECT_EQ(clean.rc, 0) << clean.out;
    EXPECT_EQ(left, 0u);
  }
}

// Two ups of different labs at once: each takes only its own lab's lock, so both build whole,
// side by side, and each down takes only its own.
TEST(Lab, TwoUpsOfDifferentLabsAtOnceBothComeUpWhole) {
  TB_REQUIRE_ROOT();
  LabGuard a(unique_lab("ua")), b(unique_lab("ub"));
  pid_t pa = start_up_and_wait(scenario("hz-bj.toml"), a.lab(), 1);
  pid_t pb = start_up_and_wait(scenario("mini.toml"), b.lab(), 0);
  int sa = 0, sb = 0;
  ::waitpid(pa, &sa, 0);
  ::waitpid(pb, &sb, 0);
  ASSERT_TRUE(WIFEXITED(sa) && WIFEXITED(sb));
  EXPECT_EQ(WEXITSTATUS(sa), 0);
  EXPECT_EQ(WEXITSTATUS(sb), 0);
  EXPECT_EQ(marked_netns(a.lab()).size(), 43u);  // hz-bj's namespaces
  EXPECT_EQ(marked_netns(b.lab()).size(), 9u);   // mini's: 4 GPUs, 2 servers, ToR, VPC, router
  EXPECT_EQ(status_json(a.lab())["phase"], "up");
  EXPECT_EQ(status_json(b.lab())["phase"], "up");
  EXPECT_EQ(testbedctl("down " + b.lab()).rc, 0);
  EXPECT_TRUE(marked_netns(b.lab()).empty());
  EXPECT_EQ(marked_netns(a.lab()).size(), 43u) << "down of one lab touched the other";
  EXPECT_EQ(testbedctl("down " + a.lab()).rc, 0);
  EXPECT_TRUE(marked_netns(a.lab()).empty());
}

TEST(Lab, SigtermDuringUpRollsBack) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("et"));
  auto dir = std::filesystem::temp_directory_path() / ("tb-e2e-" + g.lab());
  std::filesystem::create_directories(dir);
  pid_t pid = start_up_and_wait(big_scenario(dir, 32), g.lab(), 30);
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0) << "up finished before the signal; use a larger lab";
  EXPECT_TRUE(marked_netns(g.lab()).empty());
  EXPECT_FALSE(std::filesystem::exists("/run/testbedctl/" + g.lab()));
  std::filesystem::remove_all(dir);
}

// The wall-clock time (ms) of the first delay stage's start in the lab's supervisor events; 0
// when none has started.
int64_t first_stage_start_ms(const std::string& lab) {
  std::ifstream in(lab::lab_dir(lab) + "/events.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto e = json::parse(line, nullptr, false);
    if (e.is_object() && e.value("event", "") == "started" &&
        e.value("child", "").starts_with("stage "))
      return e.value("t_unix_ms", int64_t{0});
  }
  return 0;
}

// Starts `up` of `path` (delay stages by --shaping tbf, whatever the kernel) and returns once
// its first delay stage has started (bounded: 20 s).
pid_t start_up_until_a_stage_runs(const std::string& path, const std::string& lab) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::freopen("/dev/null", "w", stdout);
    ::execl(TB_TESTBEDCTL, TB_TESTBEDCTL, "up", path.c_str(), "--name", lab.c_str(), "--shaping",
            "tbf", nullptr);
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline && first_stage_start_ms(lab) == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return pid;
}

// `up` hands the delay stages to the lab's supervisor as soon as their namespaces exist, so
// they start and calibrate while the rest of the lab is built (lab/daemons.h LabKernel; issue
// 34): the first stage starts before the first hosts file is written, which comes after every
// link, address, route and sysctl. Then every stage serves and the lab answers through them.
TEST(Lab, DelayStagesStartWhileTheRestOfTheLabIsBuilt) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("es"));
  auto dir = std::filesystem::temp_directory_path() / ("tb-e2e-" + g.lab());
  std::filesystem::create_directories(dir);
  CmdResult up =
      testbedctl("up " + big_scenario(dir, 16) + " --name " + g.lab() + " --shaping tbf");
  std::filesystem::remove_all(dir);
  ASSERT_EQ(up.rc, 0) << up.out;
  const int64_t started = first_stage_start_ms(g.lab());
  ASSERT_GT(started, 0) << "no delay stage started";
  json st = status_json(g.lab());
  ASSERT_FALSE(st.is_null());
  int64_t first_hosts = std::numeric_limits<int64_t>::max();
  for (const auto& ns : netns_of(st)) {
    struct stat sb {};
    if (::stat(("/etc/netns/" + ns + "/hosts").c_str(), &sb) == 0)
      first_hosts =
          std::min(first_hosts, int64_t{sb.st_mtim.tv_sec} * 1000 + sb.st_mtim.tv_nsec / 1'000'000);
  }
  ASSERT_NE(first_hosts, std::numeric_limits<int64_t>::max()) << "no hosts file";
  EXPECT_LT(started, first_hosts) << "the first stage started " << started - first_hosts
                                  << " ms after the first hosts file: at the end of the build";
  // Every stage serves (the supervisor counts one running once it said it is ready).
  std::ifstream in(lab::lab_dir(g.lab()) + "/supervisor.json");
  const json children = json::parse(in, nullptr, false);
  ASSERT_TRUE(children.is_array());
  size_t stages = 0;
  for (const auto& c : children) {
    if (!c.value("name", "").starts_with("stage ")) continue;
    ++stages;
    EXPECT_TRUE(c.value("running", false)) << c.dump();
  }
  EXPECT_EQ(stages, 18u);  // one per server, the VPC switch's and the transit router's
  // Through a stage: a server's frontend to the VPC switch's side and back.
  CmdResult ping = testbedctl("exec " + g.lab() + " dc/s3 -- ping -c 2 -W 2 dc-tr");
  EXPECT_EQ(ping.rc, 0) << ping.out;
}

// A SIGTERM to `up` after its delay stages started, while it still builds, rolls them back with
// the rest; a kill -9 then leaves them to `clean`, which finds them by the owner marker. Either
// way nothing of the lab is left: no process, namespace, hosts file or state.
TEST(Lab, SigtermOrKillAfterTheDelayStagesStartedLeavesNothing) {
  TB_REQUIRE_ROOT();
  for (int sig : {SIGTERM, SIGKILL}) {
    LabGuard g(unique_lab(sig == SIGTERM ? "ev" : "ew"));
    auto dir = std::filesystem::temp_directory_path() / ("tb-e2e-" + g.lab());
    std::filesystem::create_directories(dir);
    pid_t pid = start_up_until_a_stage_runs(big_scenario(dir, 32), g.lab());
    const bool stage_ran = first_stage_start_ms(g.lab()) > 0;
    ::kill(pid, sig);
    int status = 0;
    ::waitpid(pid, &status, 0);
    std::filesystem::remove_all(dir);
    EXPECT_TRUE(stage_ran) << "no stage started within 20 s";
    if (sig == SIGTERM) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0)
          << "up finished before the signal; use a larger lab";
    } else {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
          << "up ended before the kill; use a larger lab";
      CmdResult clean = testbedctl("clean " + g.lab());
      EXPECT_EQ(clean.rc, 0) << clean.out;
    }
    EXPECT_TRUE(marked_netns(g.lab()).empty()) << strsignal(sig);
    EXPECT_EQ(named_netns(g.lab()), 0u) << strsignal(sig);
    EXPECT_TRUE(owned_processes("testbedctl lab=" + g.lab()).empty()) << strsignal(sig);
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/etc/netns", ec))
      EXPECT_FALSE(e.path().filename().string().starts_with("tb-" + g.lab() + "-")) << e.path();
    EXPECT_FALSE(std::filesystem::exists("/run/testbedctl/" + g.lab())) << strsignal(sig);
  }
}

// Without root a verb runs in the user's keeper (core/userns.h, tests/e2e/rootless_test.cc),
// which needs the user's own XDG_RUNTIME_DIR: without one every lab verb is exit 2 saying so.
TEST(Lab, NotRootWithoutXdgRuntimeDirIsExitTwo) {
  TB_REQUIRE_ROOT();
  auto copy = std::filesystem::temp_directory_path() / "tb-e2e-testbedctl";
  std::filesystem::copy_file(TB_TESTBEDCTL, copy,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(copy, std::filesystem::perms(0755));
  auto scen = std::filesystem::temp_directory_path() / "tb-e2e-mini.toml";
  std::filesystem::copy_file(scenario("mini.toml"), scen,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(scen, std::filesystem::perms(0644));
  for (const std::string& verb : std::vector<std::string>{
           "up " + scen.string(), "down mini", "clean mini", "exec mini dc/s0/g0 -- true"}) {
    CmdResult r = sh("setpriv --reuid=65534 --regid=65534 --clear-groups env -u XDG_RUNTIME_DIR " +
                     copy.string() + " " + verb);
    EXPECT_EQ(r.rc, 2) << verb << ": " << r.out;
    EXPECT_NE(r.out.find("XDG_RUNTIME_DIR is not set"), std::string::npos) << r.out;
  }
  std::filesystem::remove(copy);
  std::filesystem::remove(scen);
}

TEST(Lab, BadScenarioIsExitTwoAndBuildsNothing) {
  TB_REQUIRE_ROOT();
  auto path = std::filesystem::temp_directory_path() / "tb-e2e-bad.toml";
  std::ofstream(path) << "[lab]\nname = \"ebad\"\n[[region]]\nname = \"dc\"\nservers = 0\n";
  CmdResult r = testbedctl("up " + path.string());
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find(path.string() + ":"), std::string::npos) << r.out;
  EXPECT_TRUE(marked_netns("ebad").empty());
  std::filesystem::remove(path);
}

TEST(Lab, AddressSpaceOverlappingAHostRouteIsRefused) {
  TB_REQUIRE_ROOT();
  CmdResult routes = sh("ip -4 -o route show table main scope link");
  std::string prefix = routes.out.substr(0, routes.out.find(' '));
  if (prefix.empty() || prefix.find('/') == std::string::npos)
    GTEST_SKIP() << "this host has no connected IPv4 route to collide with";
  auto path = std::filesystem::temp_directory_path() / "tb-e2e-overlap.toml";
  auto route = parse_prefix(prefix);
  ASSERT_TRUE(route) << prefix;
  // The loader takes prefixes up to /24 without host bits: the /24 holding the route overlaps it.
  prefix = Prefix{route->addr, std::min(route->len, 24)}.network().to_string();
  std::ofstream(path) << "[lab]\nname = \"eovl\"\naddress_space = \"" << prefix
                      << "\"\n[[region]]\nname = \"dc\"\nservers = 1\ngpus_per_server = 1\n"
                         "scale_up = \"nvlink\"\nrail = \"hpn\"\nfrontend = \"vpc\"\n";
  CmdResult r = testbedctl("up " + path.string());
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("overlaps"), std::string::npos) << r.out;
  EXPECT_TRUE(marked_netns("eovl").empty());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tb::e2e
