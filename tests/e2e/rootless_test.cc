// Labs without root (issue 33, docs/design-rootless.md R2): a throwaway system account, with no
// sudo, brings mini up inside its keeper's user namespace, asks its status, pings between two
// GPUs and takes it down; the host's named namespaces and root-namespace links are the same
// before and after, and none of the account's namespaces is ever among the host's.
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
    char tmpl[] = "/tmp/tb-rootless-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return;
    runtime_ = tmpl;
    ok_ = ::chown(tmpl, uid_, gid_) == 0 && ::chmod(tmpl, 0700) == 0;
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
  const std::string& runtime() const { return runtime_; }
  // `testbedctl ARGS` as this account: its uid, gid and groups, a clean environment of its own.
  CmdResult testbedctl(const std::string& args) const {
    return sh("setpriv --reuid " + std::to_string(uid_) + " --regid " + std::to_string(gid_) +
              " --init-groups env -i HOME=" + home_ + " USER=" + name_ + " XDG_RUNTIME_DIR=" +
              runtime_ + " PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin " +
              tbctl() + " " + args);
  }

 private:
  std::string name_, home_, runtime_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool made_ = false, ok_ = false;
};

TEST(Rootless, AnOrdinaryAccountBringsMiniUpPingsAndTakesItDown) {
  TB_REQUIRE_ROOT();
  if (sh("command -v useradd && command -v userdel && command -v setpriv").rc != 0)
    GTEST_SKIP() << "needs useradd, userdel and setpriv (passwd, util-linux)";
  if (sh("unshare --user true").rc != 0) GTEST_SKIP() << "this kernel refuses user namespaces";
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

}  // namespace
}  // namespace tb::e2e
