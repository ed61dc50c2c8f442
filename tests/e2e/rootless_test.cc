// Labs without root (issue 33, docs/design-rootless.md R2, R3, R5), as throwaway system accounts
// with no sudo: mini up, status, exec, down (R2); kill -9 of the keeper or of every process of
// the account leaves no namespace, interface or process (R3); verify, bench and a `run` with a
// fault timeline (R3); a second account can neither see nor touch the first's lab, and root
// lists and cleans every user's labs (R5). Every test runs under a fixture that compares the
// root namespace's links, routes, iptables and nftables rulesets before and after it.
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "e2e_util.h"

namespace tb::e2e {
namespace {

std::set<std::string> lines_of(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.insert(l);
  return out;
}

// The root namespace's interface names (ip -o link: "N: name: <...>"); counters and state left out.
std::set<std::string> host_links() {
  std::set<std::string> out;
  // stderr apart: ip names each veth peer's namespace by asking the kernel about every file in
  // /run/netns, and one another test is removing right then answers "Peer netns reference is
  // invalid" (rtnl_net_getid), a line that is no interface.
  for (const auto& l : lines_of(sh("(ip -o link show 2>/dev/null)").out)) {
    const auto a = l.find(": "), b = l.find(": ", a + 2);
    if (a != std::string::npos && b != std::string::npos) out.insert(l.substr(a + 2, b - a - 2));
  }
  return out;
}

std::set<std::string> host_netns() {
  std::set<std::string> out;
  for (const auto& l : lines_of(sh("ip netns list").out)) out.insert(l.substr(0, l.find(' ')));
  return out;
}

// Whether `pid` runs: exists and is not a zombie (one whose parent, pid 1 here, has not reaped
// it yet has ended).
bool running(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// Root's labs on this host (named namespaces of testbedctl's), which root's clean --all takes.
bool other_labs_on_host() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec))
    if (e.path().filename().string().starts_with("tb-")) return true;
  return false;
}

// Pids of every running process of `uid` (read from /proc).
std::vector<int> processes_of(uid_t uid) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0 && st.st_uid == uid && running(std::stoi(name)))
      out.push_back(std::stoi(name));
  }
  return out;
}

// A system account made for this test and removed when it ends, passed or failed: every process
// of its uid killed by pid, then userdel -r, then its runtime directory.
class ThrowawayAccount {
 public:
  explicit ThrowawayAccount(std::string name) : name_(std::move(name)) {
    made_ = sh("useradd --system --create-home --shell /usr/sbin/nologin " + name_).rc == 0;
    if (!made_) return;
    const passwd* pw = ::getpwnam(name_.c_str());
    made_ = pw != nullptr;
    if (!made_) return;
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    home_ = pw->pw_dir;
    // Where logind would make it, so that root finds the keeper (status --all-users).
    ::mkdir("/run/user", 0755);
    runtime_ = "/run/user/" + std::to_string(uid_);
    if (::mkdir(runtime_.c_str(), 0700) != 0) {
      runtime_.clear();
      return;
    }
    ok_ = ::chown(runtime_.c_str(), uid_, gid_) == 0 && ::chmod(runtime_.c_str(), 0700) == 0;
  }
  ~ThrowawayAccount() {
    if (!made_) return;
    for (int round = 0; round < 50; ++round) {  // bounded: 5 s
      const auto pids = processes_of(uid_);
      if (pids.empty()) break;
      for (int pid : pids) ::kill(pid, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    sh("userdel -r " + name_);
    if (!runtime_.empty()) std::filesystem::remove_all(runtime_);
  }
  bool ok() const { return made_ && ok_; }
  uid_t uid() const { return uid_; }
  const std::string& name() const { return name_; }
  const std::string& home() const { return home_; }
  const std::string& runtime() const { return runtime_; }
  // `testbedctl ARGS` as this account: its uid, gid and groups, a clean environment of its own.
  CmdResult testbedctl(const std::string& args) const { return as(tbctl() + " " + args); }
  // Any command as this account (its stdout only when `quiet_stderr`).
  CmdResult as(const std::string& cmd, bool quiet_stderr = false) const {
    return sh("setpriv --reuid " + std::to_string(uid_) + " --regid " + std::to_string(gid_) +
              " --init-groups env -i HOME=" + home_ + " USER=" + name_ + " XDG_RUNTIME_DIR=" +
              runtime_ + " PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin " +
              cmd + (quiet_stderr ? " 2>/dev/null" : ""));
  }
  // The keeper's pid from its pid file (0: none).
  int keeper() const {
    int pid = 0;
    std::ifstream(runtime_ + "/testbedctl/keeper.pid") >> pid;
    return pid;
  }

 private:
  std::string name_, home_, runtime_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool made_ = false, ok_ = false;
};

// The root namespace as a rootless test must leave it: links (ip -o link, without the
// per-interface counters ip does not print there anyway), routes of every table, iptables and
// nftables rulesets with their packet and byte counters and iptables-save's dated comments left
// out. stdout only: a message on stderr (another test's namespace going away while ip asks about
// it) is no part of the host's state. Rootless.* is serial (serial_tests.cmake), so no other test
// of the suite changes these meanwhile.
std::string host_network_state() {
  return sh("(echo '# links'; ip -o link show 2>/dev/null | sed -E 's/^[0-9]+: //';"
            " echo '# routes'; ip route show table all 2>/dev/null;"
            " echo '# ip6 routes'; ip -6 route show table all 2>/dev/null;"
            " echo '# iptables'; iptables-save 2>/dev/null | grep -v '^#' |"
            " sed -E 's/\\[[0-9]+:[0-9]+\\]//';"
            " echo '# nft'; nft list ruleset 2>/dev/null |"
            " sed -E 's/packets [0-9]+ bytes [0-9]+//') | sort")
      .out;
}

class Rootless : public testing::Test {
 protected:
  void SetUp() override {
    TB_REQUIRE_ROOT();
    if (sh("command -v useradd && command -v userdel && command -v setpriv").rc != 0)
      GTEST_SKIP() << "needs useradd, userdel and setpriv (passwd, util-linux)";
    if (sh("unshare --user true").rc != 0) GTEST_SKIP() << "this kernel refuses user namespaces";
    host_before_ = host_network_state();
    checked_ = true;
  }
  void TearDown() override {
    if (!checked_) return;
    // The accounts (and their labs) are gone by now: each test's accounts are its locals.
    EXPECT_EQ(host_network_state(), host_before_)
        << "the root namespace's links, routes, iptables or nftables changed";
  }
  std::string host_before_;
  bool checked_ = false;
};

// The inode in "net:[4026532123]" ("" when there is none).
std::string inode_in(const std::string& text) {
  const auto open = text.find("net:["), close = text.find(']', open);
  return open == std::string::npos || close == std::string::npos
             ? ""
             : text.substr(open + 5, close - open - 5);
}

// The net namespaces (inodes) process `pid` shows: its own and every nsfs bind mount of its
// mount namespace (a lab's named namespaces are such mounts in the keeper's).
void add_netns_of(const std::string& pid, std::set<std::string>& out) {
  std::error_code ec;
  const auto link = std::filesystem::read_symlink("/proc/" + pid + "/ns/net", ec);
  if (!ec && !inode_in(link.string()).empty()) out.insert(inode_in(link.string()));
  std::ifstream mi("/proc/" + pid + "/mountinfo");
  for (std::string l; std::getline(mi, l);)
    if (const auto i = inode_in(l); !i.empty() && l.find(" nsfs ") != std::string::npos)
      out.insert(i);
}

// Every net namespace the host can still show: lsns's, and every process's own and bind mounts.
std::set<std::string> live_netns() {
  std::set<std::string> out;
  for (auto l : lines_of(sh("lsns -t net -n -o NS 2>/dev/null").out))
    out.insert(l.substr(l.find_first_not_of(' ')));
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (!name.empty() && std::isdigit(static_cast<unsigned char>(name[0]))) add_netns_of(name, out);
  }
  return out;
}

// The net namespaces the processes of `uid` hold that the host did not show `before` (their
// mount namespaces are copies of the host's, with whatever nsfs mounts it held then).
std::set<std::string> new_netns_of(uid_t uid, const std::set<std::string>& before) {
  std::set<std::string> all, out;
  for (int pid : processes_of(uid)) add_netns_of(std::to_string(pid), all);
  for (const auto& n : all)
    if (!before.contains(n)) out.insert(n);
  return out;
}

// Waits (bounded: 5 s) until no process of `uid` runs and none of `netns` is left anywhere.
void expect_nothing_left(uid_t uid, const std::set<std::string>& netns, const std::string& what) {
  std::vector<int> procs;
  std::set<std::string> left;
  for (int i = 0; i < 50; ++i) {
    procs = processes_of(uid);
    left.clear();
    if (procs.empty()) {
      const auto live = live_netns();
      for (const auto& n : netns)
        if (live.contains(n)) left.insert(n);
      if (left.empty()) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::string p, n;
  for (int pid : procs) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string c;
    comm >> c;
    p += " " + std::to_string(pid) + "(" + c + ")";
  }
  for (const auto& x : left) n += " " + x;
  ADD_FAILURE() << what << ": 5 s later processes of the account:" << p
                << "; its net namespaces still live:" << n;
}

TEST_F(Rootless, AnOrdinaryAccountBringsMiniUpPingsAndTakesItDown) {
  const std::set<std::string> links_before = host_links(), netns_before = host_netns();

  ThrowawayAccount user("tbrl" + std::to_string(::getpid()));
  ASSERT_TRUE(user.ok()) << "could not make the throwaway account";
  const std::string lab = unique_lab("rl");
  const std::string lab_prefix = "tb-" + lab + "-";

  auto r = user.testbedctl("up " + scenario("mini.toml") + " --name " + lab);
  ASSERT_EQ(r.rc, 0) << r.out;
  // The keeper: its pid file is the account's, 0600, and names a live process of its uid.
  const std::string pid_file = user.runtime() + "/testbedctl/keeper.pid";
  struct stat st {};
  ASSERT_EQ(::stat(pid_file.c_str(), &st), 0) << pid_file;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, user.uid());
  int keeper = 0;
  std::ifstream(pid_file) >> keeper;
  ASSERT_GT(keeper, 0);
  ASSERT_EQ(::stat(("/proc/" + std::to_string(keeper)).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, user.uid());
  // Its namespaces are in no view of the host's: no name of the lab under /run/netns.
  for (const auto& n : host_netns()) EXPECT_FALSE(n.starts_with(lab_prefix)) << n;

  r = user.testbedctl("status " + lab);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(contains(r.out, lab)) << r.out;
  r = user.testbedctl("exec " + lab + " dc/s0/g0 -- ping -c 3 -i 0.2 -W 2 dc-s1-g0");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "3 received")) << r.out;
  // Root's own view: the lab does not exist for it (it lives in the account's namespaces).
  EXPECT_EQ(testbedctl("status " + lab).rc, 2);

  // What a user namespace cannot have is refused, naming why: FRR's daemons switch to user frr.
  const std::string bfd = user.runtime() + "/bfd.toml";
  std::filesystem::copy_file(scenario("hz-bj.toml"), bfd);
  std::ofstream(bfd, std::ios::app) << "\n[failover]\nmode = \"bfd\"\n";
  ASSERT_EQ(::chown(bfd.c_str(), user.uid(), static_cast<gid_t>(-1)), 0);
  r = user.testbedctl("up " + bfd + " --name " + lab + "f");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "user frr")) << r.out;

  r = user.testbedctl("down " + lab);
  EXPECT_EQ(r.rc, 0) << r.out;
  r = user.testbedctl("status " + lab);
  EXPECT_NE(r.rc, 0) << r.out;

  // The keeper leaves on SIGTERM (the account may signal its own process; the test is root).
  ASSERT_EQ(::kill(keeper, SIGTERM), 0);
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {  // bounded: 5 s
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gone = !running(keeper);
  }
  EXPECT_TRUE(gone) << "keeper " << keeper << " still runs 5 s after SIGTERM";
  EXPECT_FALSE(std::filesystem::exists(pid_file)) << "the keeper left its pid file";
  EXPECT_TRUE(processes_of(user.uid()).empty()) << "processes of the account left after down";

  // The host as it was: the same root-namespace links; no named namespace of the lab's.
  EXPECT_EQ(host_links(), links_before);
  for (const auto& n : host_netns()) {
    if (!netns_before.contains(n)) {
      EXPECT_FALSE(n.starts_with(lab_prefix)) << n;
    }
  }
}

// Brings mini up as `user` and returns the lab's name ("" on failure, with the test failed).
std::string up_mini(const ThrowawayAccount& user, const std::string& prefix) {
  const std::string lab = unique_lab(prefix);
  auto r = user.testbedctl("up " + scenario("mini.toml") + " --name " + lab);
  EXPECT_EQ(r.rc, 0) << r.out;
  return r.rc == 0 ? lab : "";
}

// R3: the keeper killed (kill -9) takes every process of the lab with it — the supervisor, the
// delay stages, the congestion agent — and its namespaces: they are in the keeper's pid
// namespace, whose init dies with it (core/userns.h).
TEST_F(Rootless, KillingTheKeeperLeavesNoProcessNamespaceOrInterface) {
  ThrowawayAccount user("tbrk" + std::to_string(::getpid()));
  ASSERT_TRUE(user.ok()) << "could not make the throwaway account";
  const auto before = live_netns();
  const std::string lab = up_mini(user, "rk");
  ASSERT_FALSE(lab.empty());
  const int keeper = user.keeper();
  ASSERT_GT(keeper, 0);
  const auto netns = new_netns_of(user.uid(), before);
  // The keeper's home, and mini's 2 ToRs' and 4 GPUs' namespaces at least.
  EXPECT_GE(netns.size(), 7u) << "the lab's namespaces were not all seen";
  EXPECT_GE(processes_of(user.uid()).size(), 3u) << "keeper, init, supervisor at least";
  ASSERT_EQ(::kill(keeper, SIGKILL), 0);
  expect_nothing_left(user.uid(), netns, "kill -9 of the keeper");
  // The account's next verb starts a fresh keeper (the killed one may still be a zombie: its
  // pid file names a process with no namespaces left), and the lab is gone from its view.
  auto r = user.testbedctl("status " + lab);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "does not exist for this user")) << r.out;
  EXPECT_NE(user.keeper(), keeper) << "no fresh keeper";
  r = user.testbedctl("status");
  EXPECT_EQ(r.rc, 0) << r.out;
}

// R3: every process of the account killed at once (one pass over /proc by uid, as root): the
// supervisor cannot restart a stage into a namespace that survives, nothing is left.
TEST_F(Rootless, KillingEveryProcessOfTheAccountLeavesNothing) {
  ThrowawayAccount user("tbra" + std::to_string(::getpid()));
  ASSERT_TRUE(user.ok()) << "could not make the throwaway account";
  const auto before = live_netns();
  const std::string lab = up_mini(user, "ra");
  ASSERT_FALSE(lab.empty());
  const auto netns = new_netns_of(user.uid(), before);
  EXPECT_GE(netns.size(), 7u) << "the lab's namespaces were not all seen";
  const auto pids = processes_of(user.uid());
  ASSERT_FALSE(pids.empty());
  for (int pid : pids) ::kill(pid, SIGKILL);
  expect_nothing_left(user.uid(), netns, "kill -9 of every process of the account");
}

// R3: verify, bench and a `run` with a fault timeline, rootless. verify passes, or says NOT
// JUDGED with its reason (a sub-ms class without real-time priority, a stalled host): never a
// failure the link did not make.
TEST_F(Rootless, VerifyBenchAndAFaultRunWorkWithoutRoot) {
  ThrowawayAccount user("tbrv" + std::to_string(::getpid()));
  ASSERT_TRUE(user.ok()) << "could not make the throwaway account";
  const std::string lab = up_mini(user, "rv");
  ASSERT_FALSE(lab.empty());
  // --quick, as the root tier's Verify.* do: the rootless figures are bench-rootless's.
  auto r = user.testbedctl("verify " + lab + " --quick");
  EXPECT_TRUE(r.rc == 0 || (r.rc == 2 && contains(r.out, "NOT JUDGED"))) << r.out;
  EXPECT_FALSE(contains(r.out, "\nFAIL:")) << r.out;  // the verdict line
  r = user.testbedctl("bench " + lab + " allreduce -b 64K -e 256K -f 4 -n 2 -w 1");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(std::filesystem::exists(user.home() + "/.local/state/testbedctl/results/" + lab))
      << "bench wrote no results under the account's state root";
  r = user.testbedctl("down " + lab);
  EXPECT_EQ(r.rc, 0) << r.out;

  // run: mini with a blackhole and a link-down on its timeline (as Run.* does), --down after.
  const std::string text = mini_with_two_faults();
  const std::string path = user.home() + "/run.toml";
  std::ofstream(path) << text;
  ASSERT_EQ(::chown(path.c_str(), user.uid(), static_cast<gid_t>(-1)), 0);
  const std::string rlab = unique_lab("rr");
  r = user.testbedctl("run " + path + " --name " + rlab + " --down");
  EXPECT_EQ(r.rc, 0) << r.out;
  bool summary = false;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(
           user.home() + "/.local/state/testbedctl/results", ec))
    if (e.path().filename() == "summary.json") {
      std::ifstream s(e.path());
      const auto j = nlohmann::json::parse(s, nullptr, false);
      if (!j.is_discarded() && j["recovery"]["faults"].size() == 2) summary = true;
    }
  EXPECT_TRUE(summary) << "no summary.json with the two faults under the account's results";
  r = user.testbedctl("status " + rlab);
  EXPECT_EQ(r.rc, 2) << "run --down left the lab up: " << r.out;
}

// R4: a student without sudo runs the classroom exercises: start (the copy and the measurements
// file under the account's own state root), a file check (exercise 1: FAIL naming what is
// missing, exit 1), a bench check (exercise 2 as started: FAIL, the frontend cannot carry the
// target on any host, exit 1), and stop (lab down, the exercise state gone).
TEST_F(Rootless, ExercisesStartCheckAndStopWithoutRoot) {
  ThrowawayAccount user("tbrx" + std::to_string(::getpid()));
  ASSERT_TRUE(user.ok()) << "could not make the throwaway account";
  const std::string state = user.home() + "/.local/state/testbedctl/exercises/";
  const std::string one = unique_lab("rx"), two = unique_lab("ry");
  auto r = user.testbedctl("exercise start 1 --name " + one);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(contains(r.out, state + one + "/measurements.toml")) << r.out;
  EXPECT_TRUE(std::filesystem::exists(state + one + "/scenario.toml"));
  r = user.testbedctl("exercise check 1 --name " + one);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "no tier given")) << r.out;
  r = user.testbedctl("exercise stop 1 --name " + one);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE(std::filesystem::exists(state + one)) << "stop left the exercise state";
  EXPECT_EQ(user.testbedctl("status " + one).rc, 2) << "stop left the lab up";
  r = user.testbedctl("exercise start 2 --name " + two);
  ASSERT_EQ(r.rc, 0) << r.out;
  r = user.testbedctl("exercise check 2 --name " + two);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(contains(r.out, ": FAIL")) << r.out;
  EXPECT_TRUE(contains(r.out, "crossed the frontend")) << r.out;
  r = user.testbedctl("exercise stop 2 --name " + two);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(user.testbedctl("status " + two).rc, 2) << "stop left the lab up";
}

// R5: a second account can neither see nor touch the first's lab: its status, exec, link and
// down say the lab does not exist for it (exit 2), its clean --all removes nothing of the
// first's, nsenter into the first's keeper is refused, ip netns lists none of the first's; the
// first's lab still pings after all of it.
TEST_F(Rootless, ASecondAccountCannotSeeOrTouchTheFirstsLab) {
  ThrowawayAccount a("tbr1" + std::to_string(::getpid())), b("tbr2" + std::to_string(::getpid()));
  ASSERT_TRUE(a.ok() && b.ok()) << "could not make the throwaway accounts";
  const std::string lab = up_mini(a, "r5");
  ASSERT_FALSE(lab.empty());
  const std::string not_yours = "does not exist for this user";
  for (const std::string& verb :
       {"status " + lab, "exec " + lab + " dc/s0/g0 -- true",
        "link " + lab + " set dc/s0/g0 dc/tor0 --rate 1mbit", "down " + lab}) {
    auto r = b.testbedctl(verb);
    EXPECT_EQ(r.rc, 2) << verb << ": " << r.out;
    EXPECT_TRUE(contains(r.out, not_yours)) << verb << ": " << r.out;
  }
  auto r = b.testbedctl("clean --all");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "removed 0 namespaces")) << r.out;
  const int keeper = a.keeper();
  ASSERT_GT(keeper, 0);
  r = b.as("nsenter -t " + std::to_string(keeper) + " -U -m -n true");
  EXPECT_NE(r.rc, 0) << "nsenter into another account's keeper succeeded: " << r.out;
  r = b.as("nsenter -t " + std::to_string(keeper) + " -n true");
  EXPECT_NE(r.rc, 0) << "nsenter into another account's home netns succeeded: " << r.out;
  r = b.as("ip netns list", true);
  EXPECT_FALSE(contains(r.out, lab)) << r.out;
  r = b.as("ls " + std::string("/run/user/") + std::to_string(a.uid()) + "/testbedctl");
  EXPECT_NE(r.rc, 0) << "another account's runtime root is readable: " << r.out;
  // The first's lab as it was.
  r = a.testbedctl("status " + lab);
  EXPECT_EQ(r.rc, 0) << r.out;
  r = a.testbedctl("exec " + lab + " dc/s0/g0 -- ping -c 3 -i 0.2 -W 2 dc-s1-g0");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "3 received")) << r.out;
  EXPECT_EQ(a.testbedctl("down " + lab).rc, 0);
  // A down of a lab already taken down is no lab of this user's any more, either.
  EXPECT_EQ(a.testbedctl("down " + lab).rc, 2);
}

// Keepers under /run/user of accounts other than `mine`.
bool other_keepers(const std::set<uid_t>& mine) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/user", ec)) {
    const std::string n = e.path().filename();
    if (n.find_first_not_of("0123456789") != std::string::npos) continue;
    if (!mine.contains(static_cast<uid_t>(std::stoul(n))) &&
        std::filesystem::exists(e.path() / "testbedctl/keeper.pid"))
      return true;
  }
  return false;
}

// R5: root lists every user's labs (status --all-users: user, lab, state) and its clean --all
// takes them down too, inside each user's keeper.
TEST_F(Rootless, RootListsAndCleansEveryUsersLabs) {
  ThrowawayAccount a("tbr3" + std::to_string(::getpid())), b("tbr4" + std::to_string(::getpid()));
  ASSERT_TRUE(a.ok() && b.ok()) << "could not make the throwaway accounts";
  const std::string la = up_mini(a, "ru"), lb = up_mini(b, "rw");
  ASSERT_FALSE(la.empty() || lb.empty());
  auto r = testbedctl("status --all-users --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  std::set<std::string> seen;
  for (const auto& l : j["labs"])
    seen.insert(l.value("user", "") + "/" + l.value("lab", "") + "/" + l.value("phase", ""));
  EXPECT_TRUE(seen.contains(a.name() + "/" + la + "/up")) << r.out;
  EXPECT_TRUE(seen.contains(b.name() + "/" + lb + "/up")) << r.out;
  r = testbedctl("status --all-users");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(contains(r.out, a.name()) && contains(r.out, la)) << r.out;
  // A user may not ask it.
  r = a.testbedctl("status --all-users");
  EXPECT_EQ(r.rc, 2) << r.out;

  // clean --all as root would take root's own labs too, and other accounts' on this host.
  if (other_labs_on_host() || other_keepers({a.uid(), b.uid()}))
    GTEST_SKIP() << "labs this test did not make are up; root's clean --all would remove them";
  r = testbedctl("clean --all");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "user " + a.name() + ": took down 1 lab")) << r.out;
  EXPECT_TRUE(contains(r.out, "user " + b.name() + ": took down 1 lab")) << r.out;
  EXPECT_EQ(a.testbedctl("status " + la).rc, 2);
  EXPECT_EQ(b.testbedctl("status " + lb).rc, 2);
  r = testbedctl("status --all-users --json");
  EXPECT_FALSE(contains(r.out, la) || contains(r.out, lb)) << r.out;
}

}  // namespace
}  // namespace tb::e2e
