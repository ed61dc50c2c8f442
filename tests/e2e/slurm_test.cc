// Slurm starting a lab's hosts (issue 19): real munged, slurmctld and slurmd daemons over
// emulated hosts (slurm_cluster.h), srun placing one task inside each host.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>

#include "e2e_util.h"
#include "emulated_hosts.h"
#include "slurm_cluster.h"

namespace tb::e2e {
namespace {

const std::string HZ = "regions = [\"hz\"]", BJ = "regions = [\"bj\"]";

#define TB_REQUIRE_SLURM()                                           \
  if (const std::string missing = slurm_missing(); !missing.empty()) \
  GTEST_SKIP() << "Slurm or munge not installed (" << missing        \
               << "): scripts/setup --with slurm installs slurmctld slurmd slurm-client munge"

// The fixture itself: every host is a node named after it, idle; srun's tasks run inside the
// hosts (their hostname, their underlay address, their own empty /run/netns); a task's exit
// code reaches srun's caller naming the node; the destructor leaves none of its daemons and
// removes its directory.
TEST(SlurmCluster, EachHostIsANodeAndSrunRunsItsTaskInsideIt) {
  TB_REQUIRE_ROOT();
  TB_REQUIRE_SLURM();
  std::vector<pid_t> daemons;
  std::string dir;
  {
    EmulatedHosts hosts("s", {"a", "b"}, /*controller=*/true);
    ASSERT_TRUE(hosts.ok()) << hosts.error();
    SlurmCluster cluster(hosts);
    ASSERT_TRUE(cluster.start()) << cluster.error();
    dir = cluster.dir();
    daemons = {cluster.slurmd(0), cluster.slurmd(1)};
    EXPECT_TRUE(std::filesystem::exists(cluster.conf()));

    CmdResult r = cluster.srun(
        "-N2 --ntasks-per-node=1 sh -c "
        "'echo task $SLURMD_NODENAME $(hostname) $(ip -4 -o addr show dev ul0 | "
        "cut -d\" \" -f7) $(ls /run/netns | wc -l)'");
    ASSERT_EQ(r.rc, 0) << r.out << cluster.logs();
    EXPECT_TRUE(contains(r.out, "task a a " + hosts.underlay(0) + "/24 0\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "task b b " + hosts.underlay(1) + "/24 0\n")) << r.out;

    CmdResult bad =
        cluster.srun("-N2 --ntasks-per-node=1 sh -c '[ $SLURMD_NODENAME = b ] && exit 3; exit 0'");
    EXPECT_EQ(bad.rc, 3) << bad.out;
    EXPECT_TRUE(contains(bad.out, "b: task 1: Exited with exit code 3")) << bad.out;

    // The steps are over: nothing but slurmd in either host.
    for (size_t i = 0; i < 2; ++i) {
      std::vector<std::string> left;
      for (int t = 0; t < 100; ++t) {
        left = hosts.processes(i, {cluster.slurmd(i)});
        if (left.empty()) break;
        ::usleep(100'000);
      }
      EXPECT_EQ(left, std::vector<std::string>{}) << "host " << hosts.name(i);
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
  for (pid_t pid : daemons) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string c;
    comm >> c;
    EXPECT_NE(c, "slurmd") << pid;
  }
}

// The wrapper's own bad input, before any srun (no cluster needed): srun options not closed by
// "--", a lab name without nodes, a scenario without [[host]] tables, a bad scenario (plan's
// own exit 2 and file:line message passes through).
TEST(TbSrun, BadUseIsExit2NamingWhatIsMissing) {
  const std::string wrapper =
      "TESTBEDCTL=" + shell_quote(tbctl()) + " " + TB_SOURCE_DIR + "/scripts/tb-srun ";
  struct Case {
    std::string args, says;
  } cases[] = {
      {"", "needs a verb and a scenario or lab"},
      {"-N2 up x", "srun options must end with \"--\" before the verb"},
      {"status nolab", "nolab is not a scenario file: give the nodes (-N COUNT or -w NODES"},
      {"up " + scenario("hz-bj.toml"), "hz-bj.toml declares no [[host]]"},
  };
  for (const auto& c : cases) {
    CmdResult r = sh(wrapper + c.args);
    EXPECT_EQ(r.rc, 2) << c.args << ": " << r.out;
    EXPECT_TRUE(contains(r.out, c.says)) << c.args << ": " << r.out;
  }
  char t[] = "/tmp/tb-e2e-tbsrun-XXXXXX";
  ASSERT_NE(::mkdtemp(t), nullptr);
  const std::string bad = std::string(t) + "/bad.toml";
  std::ofstream(bad) << "[lab]\nname = \"x\"\nbogus = 1\n";
  CmdResult r = sh(wrapper + "up " + bad);
  std::filesystem::remove_all(t);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_TRUE(contains(r.out, bad + ":")) << r.out;
}

// hz-bj over two hosts (a: hz, b: bj) started, inspected and taken down through Slurm:
// scripts/tb-srun runs one `testbedctl VERB ... --host $SLURMD_NODENAME` per node with srun,
// against the real daemons of SlurmCluster. Bad input through srun is exit 2 with the message
// of the host that refused, and nothing is built on any host.
class SlurmHzBj : public testing::Test {
 protected:
  void SetUp() override {
    if (!is_root() || !slurm_missing().empty()) return;
    char t[] = "/tmp/tb-e2e-slurm-XXXXXX";
    ASSERT_NE(::mkdtemp(t), nullptr);
    ::chmod(t, 0755);
    tmp_ = t;
  }
  void TearDown() override {
    if (hosts_)
      for (size_t i = 0; i < hosts_->size(); ++i) hosts_->testbedctl(i, "down " + lab_);
    cluster_.reset();  // before the hosts it runs in
    hosts_.reset();
    if (!tmp_.empty()) std::filesystem::remove_all(tmp_);
  }

  // hz-bj.toml with this test's lab name, a /16 address space, and [[host]] tables: each
  // (name, underlay, what it holds: a TOML line such as regions = ["hz"]).
  std::string write_scenario(const std::string& file,
                             const std::vector<std::array<std::string, 3>>& placement) {
    return hzbj_over_hosts(lab_, tmp_ + "/" + file, placement);
  }

  CmdResult tb_srun(const std::string& args) const { return cluster_->tb_srun(args); }

  // Nothing of the lab on host i: no namespace, no state, no tunnel, no process but slurmd's
  // (a step's slurmstepd may take a moment to go).
  void expect_nothing_on(size_t i) {
    CmdResult left =
        hosts_->run(i, "ip netns list; ls /run/testbedctl; ip -d link show type vxlan");
    EXPECT_EQ(left.out, "") << "left on host " << hosts_->name(i);
    std::vector<std::string> procs;
    for (int t = 0; t < 100; ++t) {
      procs = hosts_->processes(i, {cluster_->slurmd(i)});
      if (procs.empty()) break;
      ::usleep(100'000);
    }
    EXPECT_EQ(procs, std::vector<std::string>{}) << "left running on host " << hosts_->name(i);
  }

  std::unique_ptr<EmulatedHosts> hosts_;
  std::unique_ptr<SlurmCluster> cluster_;
  std::string lab_ = unique_lab("sl");
  std::string tmp_;
};

TEST_F(SlurmHzBj, UpStatusExecDownThroughSrunOnEveryHost) {
  TB_REQUIRE_ROOT();
  TB_REQUIRE_SLURM();
  hosts_ = std::make_unique<EmulatedHosts>("q", std::vector<std::string>{"a", "b"}, true);
  ASSERT_TRUE(hosts_->ok()) << hosts_->error();
  cluster_ = std::make_unique<SlurmCluster>(*hosts_);
  ASSERT_TRUE(cluster_->start()) << cluster_->error();
  const std::string a = hosts_->underlay(0), b = hosts_->underlay(1);

  // A [[host]] that is no node of the cluster: the wrapper refuses before srun, naming it.
  const std::string stray = write_scenario("stray.toml", {{"a", a, HZ}, {"c", b, BJ}});
  CmdResult no_node = tb_srun("up " + stray);
  EXPECT_EQ(no_node.rc, 2) << no_node.out;
  EXPECT_TRUE(contains(no_node.out, "host c of " + stray + " is not a node of this Slurm cluster"))
      << no_node.out;
  // A node that is no [[host]] of the scenario (b), given to srun by hand: b's testbedctl
  // refuses with exit 2 and its message reaches the caller, naming b; a refuses too (c's
  // underlay is unreachable from it), so nothing is built anywhere.
  const std::string missing =
      write_scenario("missing.toml", {{"a", a, HZ}, {"c", "203.0.113.9", BJ}});
  CmdResult no_host = tb_srun("-N2 -w a,b -- up " + missing);
  EXPECT_EQ(no_host.rc, 2) << no_host.out;
  EXPECT_TRUE(contains(no_host.out, "--host b: no [[host]] named \"b\" in " + missing))
      << no_host.out;
  EXPECT_TRUE(contains(no_host.out, "tb-srun: host b: testbedctl up exited with 2")) << no_host.out;
  EXPECT_TRUE(contains(no_host.out, "host c's underlay 203.0.113.9 is unreachable")) << no_host.out;
  for (size_t i = 0; i < 2; ++i) expect_nothing_on(i);

  // up on both hosts at once, one srun.
  const std::string file = write_scenario("hzbj.toml", {{"a", a, HZ}, {"b", b, BJ}});
  CmdResult up = tb_srun("up " + file);
  ASSERT_EQ(up.rc, 0) << up.out << cluster_->logs();
  EXPECT_TRUE(contains(up.out, "is up on host a: 32 of its 43 nodes")) << up.out;
  EXPECT_TRUE(contains(up.out, "is up on host b: 11 of its 43 nodes")) << up.out;
  // The lab's daemons (its supervisor and the delay stages it runs) outlived the srun step
  // that started them: under proctrack/linuxproc a daemon that left the step's process tree
  // (up double-forks it) is not the step's to end.
  for (size_t i = 0; i < 2; ++i) {
    const auto procs = hosts_->processes(i, {cluster_->slurmd(i)});
    EXPECT_TRUE(std::ranges::any_of(
        procs, [](const std::string& p) { return !p.ends_with(" slurmstepd"); }))
        << "no daemon of the lab on host " << hosts_->name(i);
  }

  // A GPU in hz pings every GPU in bj by name, from inside host a (a task of srun there), and
  // one in bj pings hz's last GPU from host b: across the seam, through the WAN's tunnel.
  const std::string ping_bj =
      "for t in bj-s0-g0 bj-s0-g1 bj-s1-g0 bj-s1-g1; do ping -c1 -W5 $t >/dev/null || "
      "ping -c1 -W5 $t >/dev/null || echo FAIL $t; done";
  CmdResult from_a =
      tb_srun("-w a -N1 -- exec " + lab_ + " hz/s0/g0 -- sh -c " + shell_quote(ping_bj));
  EXPECT_EQ(from_a.rc, 0) << from_a.out;
  EXPECT_FALSE(contains(from_a.out, "FAIL")) << from_a.out;
  CmdResult from_b = tb_srun("-w b -N1 -- exec " + lab_ + " bj/s1/g1 -- ping -c1 -W5 hz-s3-g3");
  EXPECT_EQ(from_b.rc, 0) << from_b.out;

  // status on each host, one JSON file per node (srun -o %N; a lab name, not a
  // scenario: the nodes are given): each its own part, both WAN
  // tunnels up, nothing missing, the same plan digest.
  CmdResult status = tb_srun("-w a,b -o " + tmp_ + "/status-%N.json -- status " + lab_ + " --json");
  ASSERT_EQ(status.rc, 0) << status.out;
  std::string digest;
  for (size_t i = 0; i < 2; ++i) {
    std::ifstream in(tmp_ + "/status-" + hosts_->name(i) + ".json");
    auto j = nlohmann::json::parse(in, nullptr, false);
    ASSERT_TRUE(j.is_object()) << "status of host " << hosts_->name(i);
    EXPECT_EQ(j["host"]["name"], hosts_->name(i));
    if (i == 0) digest = j["host"]["digest"];
    EXPECT_EQ(j["host"]["digest"], digest);
    int tunnels = 0;
    for (const auto& l : j["links"]) {
      const std::string state = l.value("state", "");
      EXPECT_NE(state, "missing") << l.dump();
      tunnels += state.starts_with("up (tunnel to ");
    }
    EXPECT_EQ(tunnels, 2) << "host " << hosts_->name(i);  // ec and vpn
  }

  // A bench across both hosts, one srun: a coordinates (hz is its first host with a rank), b
  // joins; the rows come out of a's task, b's says where they are; both exit 0.
  CmdResult bench = tb_srun("-w a,b -- bench " + lab_ +
                            " allreduce -b 64K -e 64K -n 2 -w 1 --ranks hz/s0/g0,bj/s0/g0");
  EXPECT_EQ(bench.rc, 0) << bench.out;
  EXPECT_TRUE(contains(bench.out, "Out of bounds values : 0 OK")) << bench.out;
  EXPECT_TRUE(contains(bench.out, "rows, bench.json and every rank's log are on host a"))
      << bench.out;

  // down on both hosts, one srun: nothing left on either.
  CmdResult down = tb_srun("down " + file);
  EXPECT_EQ(down.rc, 0) << down.out;
  for (size_t i = 0; i < 2; ++i) expect_nothing_on(i);
}

// Three hosts, as many slurmds: hz's servers 2 and 3 (with their GPUs) on c, apart from their
// region's switches on a (their frontend and rail links are tunnels to a). One srun brings all
// three parts up; a GPU on c reaches hz's GPUs on a and bj's on b; one srun takes them down.
TEST_F(SlurmHzBj, ThreeHostsUpPingDownThroughSrun) {
  TB_REQUIRE_ROOT();
  TB_REQUIRE_SLURM();
  hosts_ = std::make_unique<EmulatedHosts>("r", std::vector<std::string>{"a", "b", "c"}, true);
  ASSERT_TRUE(hosts_->ok()) << hosts_->error();
  cluster_ = std::make_unique<SlurmCluster>(*hosts_);
  ASSERT_TRUE(cluster_->start()) << cluster_->error();
  const std::string file = write_scenario(
      "hzbj3.toml", {{"a", hosts_->underlay(0), HZ},
                     {"b", hosts_->underlay(1), BJ},
                     {"c", hosts_->underlay(2), "servers = [\"hz/s2\", \"hz/s3\"]"}});
  CmdResult up = tb_srun("up " + file);
  ASSERT_EQ(up.rc, 0) << up.out << cluster_->logs();
  for (const char* h : {"a", "b", "c"})
    EXPECT_TRUE(contains(up.out, std::string("is up on host ") + h + ": ")) << up.out;
  CmdResult lc = hosts_->run(2, "ip netns list");
  EXPECT_TRUE(contains(lc.out, "tb-" + lab_ + "-hz-s3-g3")) << lc.out;
  EXPECT_FALSE(contains(lc.out, "tb-" + lab_ + "-hz-s0")) << lc.out;

  const std::string ping =
      "for t in hz-s0-g0 hz-s1-g3 hz-s2-g1 bj-s0-g0 bj-s1-g1; do ping -c1 -W5 $t >/dev/null || "
      "ping -c1 -W5 $t >/dev/null || echo FAIL $t; done";
  CmdResult from_c =
      tb_srun("-w c -N1 -- exec " + lab_ + " hz/s3/g3 -- sh -c " + shell_quote(ping));
  EXPECT_EQ(from_c.rc, 0) << from_c.out;
  EXPECT_FALSE(contains(from_c.out, "FAIL")) << from_c.out;

  CmdResult down = tb_srun("down " + file);
  EXPECT_EQ(down.rc, 0) << down.out;
  for (size_t i = 0; i < 3; ++i) expect_nothing_on(i);
}

}  // namespace
}  // namespace tb::e2e
