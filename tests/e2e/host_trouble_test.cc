// End to end, as root: what the host can get wrong under testbedctl. A companion program that is
// not installed, a read-only /run, and a full disk under the state or the results directory each
// end in a clear error (exit 2: the environment, not the lab) with nothing built or left running.
#include <sys/mount.h>

#include <filesystem>
#include <fstream>

#include "core/process.h"
#include "e2e_util.h"

namespace tb::e2e {
namespace {

namespace fs = std::filesystem;

// A directory of this test's own, removed (after unmounting whatever the test mounted on it)
// however the test ends.
struct TempDir {
  std::string path;
  std::vector<std::string> mounts;
  TempDir() {
    char t[] = "/tmp/tb-e2e-host-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~TempDir() {
    for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) ::umount2(it->c_str(), MNT_DETACH);
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  // A tmpfs of `bytes` at <path>/<name>, filled to the last byte when `fill` (a disk that is
  // already full); returns its path.
  std::string small_disk(const std::string& name, size_t bytes, bool fill) {
    const std::string dir = path + "/" + name;
    fs::create_directories(dir);
    const std::string opts = "size=" + std::to_string(bytes) + ",mode=0755";
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()) != 0) return "";
    mounts.push_back(dir);
    if (fill) {
      std::ofstream f(dir + "/filler");
      std::string block(4096, 'x');
      for (size_t i = 0; i < bytes / block.size() + 2 && f; ++i) f << block << std::flush;
    }
    return dir;
  }
};

// Nothing of `lab` anywhere on the host: no namespace with its marker, no process carrying it,
// no /etc/netns entry of its namespaces.
void expect_nothing_of(const std::string& lab) {
  EXPECT_TRUE(marked_netns(lab).empty()) << "namespaces left";
  EXPECT_TRUE(owned_processes("testbedctl lab=" + lab).empty()) << "processes left";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/etc/netns", ec))
    EXPECT_FALSE(e.path().filename().string().starts_with("tb-" + lab + "-")) << e.path();
  for (const auto& e : fs::directory_iterator("/run/netns", ec))
    EXPECT_FALSE(e.path().filename().string().starts_with("tb-" + lab + "-")) << e.path();
}

// testbedctl copied alone into a directory, so its companions are not beside it.
std::string lone_testbedctl(TempDir& tmp) {
  const std::string bin = tmp.path + "/bin";
  fs::create_directories(bin);
  fs::copy_file(TB_TESTBEDCTL, bin + "/testbedctl");
  return bin + "/testbedctl";
}

TEST(HostTrouble, AMissingCompanionProgramIsExitTwoBeforeAnythingIsBuilt) {
  TB_REQUIRE_ROOT();
  TempDir tmp;
  LabGuard g(unique_lab("hm"));
  const std::string lone = lone_testbedctl(tmp);
  // PATH without the build or install directories; no TESTBEDCTL_* overrides.
  const std::string env =
      "env -u TESTBEDCTL_DELAYD -u TESTBEDCTL_PROBE -u TESTBEDCTL_RANK "
      "PATH=/usr/sbin:/usr/bin:/sbin:/bin ";
  // hz-bj here needs delay stages (no sch_netem) and failover agents (tb-probe).
  CmdResult r =
      sh(env + lone + " up " + scenario("hz-bj.toml") + " --name " + g.lab() + " --shaping tbf");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("tb-delayd not found next to testbedctl"), std::string::npos) << r.out;
  expect_nothing_of(g.lab());
  EXPECT_FALSE(fs::exists("/run/testbedctl/" + g.lab()));

  // With the stage beside it, the next one missing is named.
  fs::copy_file(fs::path(TB_TESTBEDCTL).parent_path() / "tb-delayd",
                fs::path(lone).parent_path() / "tb-delayd");
  r = sh(env + lone + " up " + scenario("hz-bj.toml") + " --name " + g.lab() + " --shaping tbf");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("tb-probe not found"), std::string::npos) << r.out;
  expect_nothing_of(g.lab());

  // bench on a lab that is up: tb-rank missing is exit 2 and starts no rank.
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
  r = sh(env + lone + " bench " + g.lab() + " allreduce -b 8K -e 8K -n 1 -w 0");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("tb-rank not found"), std::string::npos) << r.out;
  for (int pid : owned_processes("testbedctl lab=" + g.lab())) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    comm >> name;
    EXPECT_NE(name, "tb-rank");
  }
}

TEST(HostTrouble, AReadOnlyRunIsExitTwoAndBuildsNothing) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("hr"));
  // /run read-only in a mount namespace of this command alone (the host's /run stays as it is).
  CmdResult r =
      sh("unshare -m --propagation private sh -c 'mount --bind /run /run && "
         "mount -o remount,bind,ro /run && exec " +
         tbctl() + " up " + scenario("mini.toml") + " --name " + g.lab() + "'");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("Read-only file system"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/run/"), std::string::npos) << "the error names no path: " << r.out;
  expect_nothing_of(g.lab());
}

TEST(HostTrouble, AFullStateDiskIsExitTwoAndLeavesNothingBuilt) {
  TB_REQUIRE_ROOT();
  TempDir tmp;
  LabGuard g(unique_lab("hf"));
  for (bool already_full : {true, false}) {
    SCOPED_TRACE(already_full ? "full from the start" : "fills up while up writes its journal");
    // 8 KiB: mini's journal alone is larger, so the disk fills part way through the build.
    const std::string run =
        tmp.small_disk(already_full ? "run-full" : "run-small", 8192, already_full);
    ASSERT_FALSE(run.empty()) << "cannot mount a tmpfs";
    CmdResult r = sh("TESTBEDCTL_RUN_DIR=" + run + " " + tbctl() + " up " + scenario("mini.toml") +
                     " --name " + g.lab());
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_NE(r.out.find("No space left on device"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(run), std::string::npos) << "the error names no path: " << r.out;
    expect_nothing_of(g.lab());
  }
}

TEST(HostTrouble, AFullResultsDiskIsExitTwoAndLeavesNoRank) {
  TB_REQUIRE_ROOT();
  TempDir tmp;
  LabGuard g(unique_lab("hd"));
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
  const std::string results = tmp.small_disk("results", 4096, true);
  ASSERT_FALSE(results.empty()) << "cannot mount a tmpfs";
  CmdResult r = sh("TESTBEDCTL_RESULTS_DIR=" + results + " " + tbctl() + " bench " + g.lab() +
                   " allreduce -b 8K -e 8K -n 1 -w 0");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("No space left on device"), std::string::npos) << r.out;
  for (int pid : owned_processes("testbedctl lab=" + g.lab())) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    comm >> name;
    EXPECT_NE(name, "tb-rank");
  }
  EXPECT_EQ(status_json(g.lab())["phase"], "up") << "the lab itself is unharmed";
}

}  // namespace
}  // namespace tb::e2e
