// Slurm starting a lab's hosts (issue 19): real munged, slurmctld and slurmd daemons over
// emulated hosts (slurm_cluster.h), srun placing one task inside each host.
#include <gtest/gtest.h>

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

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

#define TB_REQUIRE_SLURM()                                           \
  if (const std::string missing = slurm_missing(); !missing.empty()) \
  GTEST_SKIP() << "Slurm or munge not installed (" << missing        \
               << "): scripts/setup installs slurmctld slurmd slurm-client munge"

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
    std::printf(
        "slurm cluster of 2 nodes idle after %.1f s (steady clock, start() to sinfo idle)\n",
        cluster.start_seconds());
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

}  // namespace
}  // namespace tb::e2e
