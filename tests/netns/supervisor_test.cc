// Supervisor: children run inside their namespace, carry the owner marker, are restarted when
// they die, and are all gone after stop.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
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
  void start(std::vector<ChildSpec> specs) {
    SupervisorPaths paths{(dir_ / "status.json").string(), (dir_ / "events.jsonl").string(),
                          (dir_ / "logs").string()};
    thread_ = std::thread([=, this] { (void)supervise(specs, owner_, paths, stop_); });
  }

  std::string netns_, owner_;
  fs::path dir_;
  std::atomic<bool> stop_{false};
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
  struct stat want {
  }, got{};
  ASSERT_EQ(::stat(("/run/netns/" + netns_).c_str(), &want), 0);
  ASSERT_EQ(::stat(("/proc/" + std::to_string(pid) + "/ns/net").c_str(), &got), 0);
  EXPECT_EQ(want.st_ino, got.st_ino);
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

}  // namespace
}  // namespace tb::runner
