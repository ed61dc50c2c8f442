// Live changes that do what they say (issue 22), on the mini lab: a loss of 0.001 % is installed
// (rule readback), a loss change never leaves the link without a loss rule (nft monitor sees every
// transaction), delay 0 + jitter 0 takes the direction out of the delay stage (NFQUEUE rule and
// queue gone, back with the next delay), a stage that refuses a change makes `link set` fail with
// the stage's reason, and a stage given up on as broken is started again by `link reset`.
// Lab names start with "livec" (e2e_util.h unique_lab: 8 characters).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "live_util.h"

namespace tb::e2e {
namespace {

using nlohmann::json;

std::vector<std::string> lab_netns(const std::string& lab) {
  std::vector<std::string> out;
  std::istringstream in(sh("ip netns list").out);
  for (std::string line; std::getline(in, line);) {
    const std::string name = line.substr(0, line.find(' '));
    if (name.starts_with("tb-" + lab + "-")) out.push_back(name);
  }
  return out;
}

// NFQUEUE rules of the lab, in every one of its namespaces (iptables -S, as a user would look).
int nfqueue_rules(const std::string& lab) {
  int n = 0;
  for (const auto& ns : lab_netns(lab))
    for (const char* chain : {"PREROUTING", "POSTROUTING"}) {
      std::istringstream in(sh("ip netns exec " + ns + " iptables -t mangle -S " + chain).out);
      for (std::string line; std::getline(in, line);)
        n += line.find("NFQUEUE") != std::string::npos &&
             line.find("lab=" + lab) != std::string::npos;
    }
  return n;
}

// Queues the lab's delay stages say they serve (their stats files).
int stage_queues(const std::string& lab) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/run/testbedctl/" + lab + "/stages")) {
    if (!e.path().string().ends_with(".stats.json")) continue;
    auto j = json::parse(read_text(e.path().string()), nullptr, false);
    if (j.is_object()) n += static_cast<int>(j.value("queues", json::array()).size());
  }
  return n;
}

// A process of ours (argv, output to `log`), SIGTERMed and reaped when this goes away.
class Proc {
 public:
  Proc(std::vector<std::string> argv, const std::string& log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) ::_exit(126);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
  }
  ~Proc() { stop(); }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {  // bounded: 5 s, then SIGKILL
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      ::usleep(50'000);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

std::string tb_delayd() {
  return (std::filesystem::path(TB_TESTBEDCTL).parent_path() / "tb-delayd").string();
}

bool has_stages(const std::string& lab) {
  return status_json(lab)["backends"].value("stages_down", -1) >= 0;
}

TEST(LiveChange, LossIsInstalledFinelyAndSwappedInOneTransaction) {
  TB_REQUIRE_ROOT();
  ScratchDir dir;
  LabGuard g(unique_lab("lcl"));
  const std::string lab = g.lab(), link = " dc/s0/g0 dc/tor0";
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + lab).rc, 0);
  if (status_json(lab)["backends"].value("shaping", "").starts_with("netem"))
    GTEST_SKIP() << "kernel netem shapes this lab: its loss is netem's, no nft rule";
  const std::string tor = "tb-" + lab + "-dc-tor0";
  auto loss_rules = [&] { return sh("ip netns exec " + tor + " nft list table inet tb_loss").out; };
  CmdResult r = testbedctl("link " + lab + " set" + link + " --loss 1%");
  ASSERT_EQ(r.rc, 0) << r.out;
  ASSERT_NE(loss_rules().find("numgen random mod 1000000 < 10000 "), std::string::npos)
      << loss_rules();

  // Every rule event of the namespace, with the transaction ("new generation") it belongs to.
  const std::string mon = dir.file("monitor.txt");
  Proc monitor({"timeout", "60", "ip", "netns", "exec", tor, "nft", "-a", "monitor"}, mon);
  ASSERT_TRUE(wait_until([&] {  // attached: its first transaction is seen
    sh("ip netns exec " + tor + " nft add table inet livec_probe");
    sh("ip netns exec " + tor + " nft delete table inet livec_probe");
    return read_text(mon).find("new generation") != std::string::npos;
  })) << read_text(mon);
  for (const char* loss : {"2%", "0.001%", "0.5%"}) {
    r = testbedctl("link " + lab + " set" + link + " --loss " + loss);
    ASSERT_EQ(r.rc, 0) << r.out;
  }
  // 0.001 % is 10 ppm, installed (rounded to nothing in 0.01 % steps before).
  r = testbedctl("link " + lab + " set" + link + " --loss 0.001%");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("loss 0.001%"), std::string::npos) << r.out;
  EXPECT_NE(loss_rules().find("numgen random mod 1000000 < 10 "), std::string::npos)
      << loss_rules();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  monitor.stop();

  // Replay: one loss rule in the chain before; after every transaction, at least one.
  const std::string events = read_text(mon);
  int rules = 1, transactions = 0, changes = 0;
  std::istringstream in(events);
  for (std::string line; std::getline(in, line);) {
    if (line.find("tb_loss") != std::string::npos) {
      if (line.starts_with("add rule")) ++rules, ++changes;
      if (line.starts_with("delete rule")) --rules, ++changes;
      if (line.starts_with("delete table")) rules = 0, ++changes;
    }
    if (line.starts_with("# new generation")) {
      ++transactions;
      EXPECT_GE(rules, 1) << "a moment without a loss rule on the link:\n" << events;
    }
  }
  EXPECT_GE(changes, 8) << events;  // 4 swaps: an add and a delete each
  EXPECT_GE(transactions, 4) << events;
  EXPECT_EQ(rules, 1) << events;
  // Off: the rule goes, and with no rule left the table too.
  r = testbedctl("link " + lab + " set" + link + " --loss 0");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(loss_rules().find("numgen"), std::string::npos) << loss_rules();
  EXPECT_TRUE(reaches(lab, "dc/s0/g0", "dc-s1-g0.rail"));
}

TEST(LiveChange, ZeroLeavesTheStageARefusalFailsAndResetRevivesABrokenStage) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("lcz"));
  const std::string lab = g.lab(), link = " dc/s0/g0 dc/tor0";
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + lab).rc, 0);
  if (!has_stages(lab)) GTEST_SKIP() << "kernel netem shapes this lab: no delay stage";
  const int rules0 = nfqueue_rules(lab), queues0 = stage_queues(lab);
  ASSERT_GT(rules0, 0);

  // A delay steers both directions through a stage; zero takes them out again.
  CmdResult r = testbedctl("link " + lab + " set" + link + " --delay 2ms --jitter 100us");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(nfqueue_rules(lab), rules0 + 2);
  EXPECT_EQ(stage_queues(lab), queues0 + 2);
  r = testbedctl("link " + lab + " set" + link + " --delay 0 --jitter 0");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(nfqueue_rules(lab), rules0) << "the NFQUEUE rules stayed at delay 0";
  EXPECT_EQ(stage_queues(lab), queues0) << "the stage queues stayed at delay 0";
  EXPECT_TRUE(reaches(lab, "dc/s0/g0", "dc-s1-g0.rail"));

  // A stage that refuses its change: every free queue number near the ones the stages use is
  // held by another tb-delayd (its own process, bound first), so the new queue's bind fails.
  std::vector<std::unique_ptr<Proc>> squatters;
  ScratchDir dir;
  for (const auto& ns : {"tb-" + lab + "-dc-s0-g0", "tb-" + lab + "-dc-tor0"}) {
    std::vector<std::string> argv{"ip", "netns", "exec", ns, tb_delayd()};
    auto j = json::parse(read_text("/run/testbedctl/" + lab + "/stages/" + ns + ".stats.json"),
                         nullptr, false);
    std::set<int> used;
    if (j.is_object())
      for (const auto& q : j["queues"]) used.insert(q["num"].get<int>());
    for (int q = 1; q <= 16; ++q)
      if (!used.count(q)) argv.insert(argv.end(), {"--queue", std::to_string(q) + ":delay_us=0"});
    squatters.push_back(std::make_unique<Proc>(argv, dir.file(ns + ".log")));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  r = testbedctl("link " + lab + " set" + link + " --delay 1ms");
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("refused the change"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("another process serves this queue"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the stage's previous queues are back"), std::string::npos) << r.out;
  EXPECT_EQ(nfqueue_rules(lab), rules0);  // never steered to a queue nobody of ours serves
  squatters.clear();                      // stopped and reaped
  // Once the queue numbers are free the same change is taken (a stage that failed to start is
  // started again by the reload).
  r = testbedctl("link " + lab + " set" + link + " --delay 1ms");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(nfqueue_rules(lab), rules0 + 2);
  EXPECT_TRUE(reaches(lab, "dc/s0/g0", "dc-s1-g0.rail"));

  // Broken: dc/tr's stage killed each time it is back until the supervisor gives it up.
  auto stage_tr = [&] { return stage_of(lab, "stage dc/tr"); };
  ASSERT_TRUE(kill_stage_until_broken(lab, "stage dc/tr")) << stage_tr().dump();
  ASSERT_TRUE(unreachable(lab, "dc/vpc", "dc-tr"));
  CmdResult text = testbedctl("status " + lab);
  EXPECT_NE(text.out.find("link " + lab + " reset A B"), std::string::npos) << text.out;
  // `link reset` on a link through it starts it again, and the link carries traffic.
  r = testbedctl("link " + lab + " reset dc/vpc dc/tr");
  ASSERT_EQ(r.rc, 0) << r.out;
  // The stage answered for its config before it told the supervisor it serves: allow a poll.
  EXPECT_TRUE(wait_until([&] { return stage_tr().value("running", false); }, 5))
      << stage_tr().dump();
  EXPECT_FALSE(stage_tr().value("broken", true)) << stage_tr().dump();
  EXPECT_TRUE(reaches(lab, "dc/vpc", "dc-tr"));
  EXPECT_EQ(lab_events(lab, "revived").size(), 1u);
  EXPECT_EQ(testbedctl("status " + lab).rc, 0);  // healthy again
}

}  // namespace
}  // namespace tb::e2e
