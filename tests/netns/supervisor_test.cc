// Supervisor: children run inside their namespace, carry the owner marker, are restarted when
// they die, and are all gone after stop. A stage child keeps SIGHUP blocked across its exec and
// counts as running once it says it serves; a reload revives a child given up on.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/process.h"
#include "runner/supervisor.h"

namespace tb::runner {
namespace {

namespace fs = std::filesystem;

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: creates a network namespace";
    netns_ = "tb-t" + std::to_string(::getpid()) + "-sup";
    ASSERT_EQ(std::system(("ip netns add " + netns_).c_str()), 0);
    dir_ = fs::temp_directory_path() / netns_;
    fs::create_directories(dir_ / "logs");
    owner_ = "testbedctl lab=t" + std::to_string(::getpid()) + "sup";
  }
  void TearDown() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    terminate(owned_processes(owner_), 500);
    if (!netns_.empty()) std::system(("ip netns del " + netns_ + " 2>/dev/null").c_str());
    fs::remove_all(dir_);
  }
  std::vector<ChildState> states() {
    std::ifstream in(dir_ / "status.json");
    auto j = nlohmann::json::parse(in, nullptr, false);
    return j.is_discarded() ? std::vector<ChildState>{} : states_from_json(j);
  }
  template <class Pred>
  bool wait_for(Pred p, int ms = 3000) {
    for (int i = 0; i < ms / 10; ++i) {
      if (p()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  void start(std::vector<ChildSpec> specs, InProcessMain in_process = {}) {
    SupervisorPaths paths{(dir_ / "status.json").string(), (dir_ / "events.jsonl").string(),
                          (dir_ / "logs").string()};
    thread_ = std::thread([=, this] {
      (void)supervise(
          specs, owner_, paths, stop_, &reload_, [specs] { return specs; }, in_process);
    });
  }
  std::string events() {
    std::ifstream ev(dir_ / "events.jsonl");
    return {std::istreambuf_iterator<char>(ev), {}};
  }
  // `pid` runs in the namespace the test asked for.
  void expect_in_netns(int pid) {
    struct stat want {
    }, got{};
    ASSERT_EQ(::stat(("/run/netns/" + netns_).c_str(), &want), 0);
    ASSERT_EQ(::stat(("/proc/" + std::to_string(pid) + "/ns/net").c_str(), &got), 0);
    EXPECT_EQ(want.st_ino, got.st_ino);
  }

  std::string netns_, owner_;
  fs::path dir_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> reload_{false};
  std::thread thread_;
};

TEST_F(SupervisorTest, RunsInNamespaceRestartsAndStops) {
  start({{"sleeper", netns_, {"/bin/sleep", "30"}}});
  ASSERT_TRUE(wait_for([&] {
    auto s = states();
    return s.size() == 1 && s[0].running;
  }));
  const int pid = states()[0].pid;
  // In the namespace we asked for.
  expect_in_netns(pid);
  // Found by its owner marker.
  EXPECT_EQ(owned_processes(owner_), std::vector<int>{pid});

  ::kill(pid, SIGKILL);
  ASSERT_TRUE(wait_for([&] {
    auto s = states();
    return s.size() == 1 && s[0].running && s[0].pid != pid && s[0].restarts == 1;
  }));
  EXPECT_EQ(states()[0].last_exit, "signal Killed");

  stop_ = true;
  thread_.join();
  EXPECT_TRUE(owned_processes(owner_).empty());
  std::ifstream ev(dir_ / "events.jsonl");
  std::string all((std::istreambuf_iterator<char>(ev)), {});
  for (const char* e : {"\"started\"", "\"died\"", "\"restarted\"", "\"stopped\""})
    EXPECT_NE(all.find(e), std::string::npos) << e << " missing in " << all;
  EXPECT_NE(all.find("t_mono_ns"), std::string::npos);
}

TEST_F(SupervisorTest, GivesUpOnAChildThatKeepsDying) {
  start({{"crasher", netns_, {"/bin/false"}}});
  ASSERT_TRUE(wait_for(
      [&] {
        auto s = states();
        return s.size() == 1 && s[0].broken;
      },
      10000));
  EXPECT_EQ(states()[0].last_exit, "exit 1");
}

// SIGHUP reaching a child before its program took it (issue 22: a reload could kill a stage):
// with hup_blocked it stays pending, and a program that never unblocks it (sleep) lives on;
// without, the same signal kills it.
TEST_F(SupervisorTest, SighupAtStartDoesNotKillAStageChild) {
  start({{"blocked", netns_, {"/bin/sleep", "30"}, 0, true},
         {"plain", netns_, {"/bin/sleep", "30"}}});
  ASSERT_TRUE(wait_for([&] {
    auto s = states();
    return s.size() == 2 && s[0].running && s[1].running;
  }));
  auto first = states();
  // As `link set` does, at once and again: every SIGHUP between the exec and a handler.
  for (int i = 0; i < 5; ++i) {
    ::kill(first[0].pid, SIGHUP);
    ::kill(first[1].pid, SIGHUP);
  }
  ASSERT_TRUE(wait_for([&] {
    auto s = states();
    return s.size() == 2 && s[1].restarts == 1 && s[1].running;
  })) << events();
  auto now = states();
  EXPECT_EQ(now[1].last_exit, "signal Hangup");  // the control: SIGHUP's default kills
  EXPECT_EQ(now[0].restarts, 0) << events();
  EXPECT_EQ(now[0].pid, first[0].pid);
  EXPECT_TRUE(now[0].running);
  EXPECT_EQ(::kill(first[0].pid, 0), 0);
}

// The stage itself: tb-delayd, SIGHUP'd from the moment the supervisor reports its pid, is
// neither killed nor restarted, reports "starting" until it serves (its stats file is there
// before it counts as running), and takes the reload it was sent.
TEST_F(SupervisorTest, DelayStageIsRunningOnceItServesAndSurvivesEarlySighup) {
  const std::string conf = (dir_ / "stage.conf").string(), stats = (dir_ / "stats.json").string();
  std::ofstream(conf) << "# generation 1\n41:delay_us=1000\n";
  start({{"stage t", netns_, {TB_DELAYD, "--config", conf, "--stats", stats}, 0, true, true}});
  int pid = 0;
  bool stats_before_running = true;
  for (int i = 0; i < 3000 && pid == 0; ++i) {  // bounded: 3 s
    auto s = states();
    if (!s.empty() && s[0].pid > 0) pid = s[0].pid;
    if (!s.empty() && s[0].running && !fs::exists(stats)) stats_before_running = false;
    if (pid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GT(pid, 0) << events();
  std::ofstream(conf) << "# generation 2\n41:delay_us=2000\n";
  for (int i = 0; i < 50; ++i) {  // over its first 50 ms
    ::kill(pid, SIGHUP);
    auto s = states();
    if (!s.empty() && s[0].running && !fs::exists(stats)) stats_before_running = false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(stats_before_running);
  ASSERT_TRUE(wait_for([&] {
    std::ifstream in(stats);
    auto j = nlohmann::json::parse(in, nullptr, false);
    return j.is_object() && j.value("generation", 0) == 2;
  })) << events();
  auto s = states();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(s[0].running);
  EXPECT_FALSE(s[0].starting);
  EXPECT_EQ(s[0].restarts, 0) << events();
  EXPECT_EQ(s[0].pid, pid);
  EXPECT_NE(events().find("\"ready\""), std::string::npos) << events();
}

// An in_process child (a lab's delay stage) is a fork of the supervisor running the main it was
// given, not an exec: argv[0] need not exist. It runs in its namespace under argv[0]'s name,
// counts as running from its ready byte, keeps SIGHUP blocked when asked, and its exit code is
// reported and restarted like an exec'd child's.
TEST_F(SupervisorTest, AnInProcessChildIsAForkRunningItsMainInItsNamespace) {
  InProcessMain main = [](const std::vector<std::string>& argv, int ready_fd) {
    if (argv.at(1) == "fail") return 3;
    const char byte = 1;
    if (ready_fd < 0 || ::write(ready_fd, &byte, 1) != 1) return 4;
    ::close(ready_fd);
    for (;;) ::pause();
  };
  start({{"served", netns_, {"/nonexistent/tb-fake", "serve"}, 0, true, true, true},
         {"failing", netns_, {"/nonexistent/tb-fake", "fail"}, 0, false, false, true}},
        main);
  ASSERT_TRUE(wait_for([&] {
    auto s = states();
    return s.size() == 2 && s[0].running && s[1].restarts >= 1;
  })) << events();
  const int pid = states()[0].pid;
  expect_in_netns(pid);
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  comm >> name;
  EXPECT_EQ(name, "tb-fake");
  EXPECT_EQ(states()[1].last_exit, "exit 3");
  for (int i = 0; i < 5; ++i) {  // blocked: pending, not fatal
    ::kill(pid, SIGHUP);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(states()[0].pid, pid);
  EXPECT_TRUE(states()[0].running);
  EXPECT_EQ(states()[0].restarts, 0) << events();
  EXPECT_NE(events().find("\"ready\""), std::string::npos) << events();
}

// Given up on, a child is started again by a reload (what `link set`/`link reset` send), its
// deaths and backoff forgotten.
TEST_F(SupervisorTest, ReloadRevivesABrokenChild) {
  const std::string flag = (dir_ / "fail").string();
  std::ofstream(flag) << "";
  start({{"flaky", netns_, {"/bin/sh", "-c", "test -e " + flag + " && exit 3; exec sleep 30"}}});
  ASSERT_TRUE(wait_for(
      [&] {
        auto s = states();
        return s.size() == 1 && s[0].broken;
      },
      15000))
      << events();
  fs::remove(flag);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto s = states();
  ASSERT_TRUE(s[0].broken && !s[0].running);  // never restarted on its own
  reload_ = true;
  ASSERT_TRUE(wait_for([&] {
    auto now = states();
    return now.size() == 1 && now[0].running && !now[0].broken;
  })) << events();
  EXPECT_NE(events().find("\"revived\""), std::string::npos) << events();
}

// A child that ran 10 s (kHealthyNs) before dying is restarted after the first backoff, not the
// one its earlier quick deaths had grown: 5 quick deaths (backoffs 50..800 ms) would make the
// next wait 1.6 s without the reset. ~12 s.
TEST_F(SupervisorTest, BackoffStartsOverAfterAHealthyRun) {
  const std::string count = (dir_ / "count").string();
  const std::string script = "n=$(cat " + count + " 2>/dev/null || echo 0); echo $((n+1)) > " +
                             count + "; [ $n -lt 5 ] && exit 1; [ $n -eq 5 ] && sleep 10.2 && " +
                             "exit 1; exec sleep 30";
  start({{"healthy", netns_, {"/bin/sh", "-c", script}}});
  ASSERT_TRUE(wait_for(
      [&] {
        auto s = states();
        return s.size() == 1 && s[0].restarts == 6 && s[0].running;
      },
      20000))
      << events();
  // The gap between the sixth death and the restart after it.
  std::vector<nlohmann::json> ev;
  std::istringstream in(events());
  for (std::string line; std::getline(in, line);) ev.push_back(nlohmann::json::parse(line));
  int deaths = 0;
  int64_t died_ns = 0, restarted_ns = 0;
  for (const auto& e : ev) {
    if (e["event"] == "died" && ++deaths == 6) died_ns = e["t_mono_ns"];
    if (e["event"] == "restarted" && died_ns && !restarted_ns) restarted_ns = e["t_mono_ns"];
  }
  ASSERT_GT(died_ns, 0) << events();
  ASSERT_GT(restarted_ns, died_ns) << events();
  EXPECT_LT(restarted_ns - died_ns, 800'000'000) << events();  // 50 ms, plus a loaded host
  EXPECT_FALSE(states()[0].broken);
}

}  // namespace
}  // namespace tb::runner
