// launch's pure half without root: the tier each selection resolves to (and the refusals, exit
// 2 naming the field), torchrun's environment per rank, the MPI hostfile and rsh agent, and
// the durations --timeout/--grace take. On the mini and hz-bj scenarios' topologies.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "experiment/command_workload.h"
#include "launch/command.h"
#include "plan/plan.h"
#include "scenario/loader.h"

namespace tb {
namespace {

lab::LabState lab_of(const std::string& file, const std::string& name) {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/" + file);
  EXPECT_TRUE(s) << s.error().message;
  auto p = plan::compile(*s);
  EXPECT_TRUE(p) << p.error().message;
  lab::LabState st;
  st.lab = name;
  st.phase = "up";
  st.topo = p->topo;
  return st;
}

launch::CommandOptions opts(const std::string& ranks, launch::NetTier tier) {
  launch::CommandOptions o;
  o.ranks = ranks;
  o.tier = tier;
  o.argv = {"/bin/true"};
  return o;
}

std::string env_of(const std::vector<std::string>& env, const std::string& name) {
  for (const auto& e : env)
    if (e.starts_with(name + "=")) return e.substr(name.size() + 1);
  return "<unset>";
}

using launch::NetTier;

TEST(LaunchCommand, AutoIsNvlinkInOneServerTheRailInOneRegionElseTheFrontend) {
  const auto hzbj = lab_of("hz-bj.toml", "hzbj");
  auto one_server = launch::prepare_command(hzbj, opts("hz/s1", NetTier::kAuto));
  ASSERT_TRUE(one_server) << one_server.error().message;
  EXPECT_EQ(one_server->tier, NetTier::kNvl);
  EXPECT_EQ(one_server->ifname, "nvl");
  EXPECT_EQ(one_server->ranks.size(), 4u);
  auto region = launch::prepare_command(hzbj, opts("hz", NetTier::kAuto));
  ASSERT_TRUE(region) << region.error().message;
  EXPECT_EQ(region->tier, NetTier::kRail);
  // hz is dual-ToR: the rail address sits on both ports (raila, railb; ECMP routes); Gloo takes
  // one interface name to find the address it binds, the first port's.
  EXPECT_EQ(region->ifname, "raila");
  EXPECT_EQ(region->ranks.size(), 16u);
  auto both = launch::prepare_command(hzbj, opts("all", NetTier::kAuto));
  ASSERT_TRUE(both) << both.error().message;
  EXPECT_EQ(both->tier, NetTier::kFrontend);
  EXPECT_EQ(both->ifname, "nvl");
  // The frontend over the same ranks as the rail: another address and interface, on purpose.
  auto fe = launch::prepare_command(hzbj, opts("hz", NetTier::kFrontend));
  ASSERT_TRUE(fe) << fe.error().message;
  EXPECT_EQ(fe->ifname, "nvl");
  EXPECT_NE(fe->master_addr, region->master_addr);
}

TEST(LaunchCommand, ATierTheRanksCannotUseIsExitTwoNamingWhatWouldDo) {
  const auto hzbj = lab_of("hz-bj.toml", "hzbj");
  auto nvl = launch::prepare_command(hzbj, opts("hz/s0,hz/s1", NetTier::kNvl));
  ASSERT_FALSE(nvl);
  EXPECT_EQ(nvl.error().exit_code, kExitBadInput);
  EXPECT_NE(nvl.error().message.find("--tier nvl: the ranks span 2 servers (hz/s0, hz/s1)"),
            std::string::npos)
      << nvl.error().message;
  auto rail = launch::prepare_command(hzbj, opts("all", NetTier::kRail));
  ASSERT_FALSE(rail);
  EXPECT_EQ(rail.error().exit_code, kExitBadInput);
  EXPECT_NE(rail.error().message.find("--tier rail: the ranks span regions hz and bj"),
            std::string::npos)
      << rail.error().message;
  auto sel = launch::prepare_command(hzbj, opts("hz/s7", NetTier::kAuto));
  ASSERT_FALSE(sel);
  EXPECT_NE(sel.error().message.find("--ranks"), std::string::npos);
  auto o = opts("all", NetTier::kAuto);
  o.argv = {"surely-no-such-program-on-path"};
  auto missing = launch::prepare_command(hzbj, o);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().exit_code, kExitBadInput);
  EXPECT_NE(missing.error().message.find("command not found"), std::string::npos);
  EXPECT_FALSE(launch::parse_tier("ib"));
  EXPECT_EQ(launch::parse_tier("ib").error().exit_code, kExitBadInput);
}

TEST(LaunchCommand, EveryRankGetsTorchrunsEnvironment) {
  const auto mini = lab_of("mini.toml", "mini");
  auto job = launch::prepare_command(mini, opts("all", NetTier::kAuto));
  ASSERT_TRUE(job) << job.error().message;
  ASSERT_EQ(job->ranks.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    const auto env = launch::rank_environment(*job, r);
    EXPECT_EQ(env_of(env, "RANK"), std::to_string(r));
    EXPECT_EQ(env_of(env, "ROLE_RANK"), std::to_string(r));
    EXPECT_EQ(env_of(env, "LOCAL_RANK"), std::to_string(r % 2));
    EXPECT_EQ(env_of(env, "WORLD_SIZE"), "4");
    EXPECT_EQ(env_of(env, "LOCAL_WORLD_SIZE"), "2");
    EXPECT_EQ(env_of(env, "GROUP_RANK"), std::to_string(r / 2));
    EXPECT_EQ(env_of(env, "MASTER_ADDR"), job->ranks[0].addr);
    EXPECT_EQ(env_of(env, "MASTER_PORT"), "29500");
    EXPECT_EQ(env_of(env, "TORCHELASTIC_RUN_ID"), job->run_id);
    EXPECT_EQ(env_of(env, "GLOO_SOCKET_IFNAME"), "rail");
    EXPECT_EQ(env_of(env, "NCCL_SOCKET_IFNAME"), "rail");
    EXPECT_EQ(env_of(env, "TESTBEDCTL_OWNER"), plan::owner_marker("mini"));
    EXPECT_EQ(env_of(env, "TESTBEDCTL_JOB"), job->run_id);
  }
  // A selection that skips a GPU: local ranks count the selected ones only.
  auto some = launch::prepare_command(mini, opts("dc/s0/g1,dc/s1", NetTier::kAuto));
  ASSERT_TRUE(some);
  ASSERT_EQ(some->ranks.size(), 3u);
  EXPECT_EQ(env_of(launch::rank_environment(*some, 0), "LOCAL_WORLD_SIZE"), "1");
  EXPECT_EQ(env_of(launch::rank_environment(*some, 2), "LOCAL_RANK"), "1");
  EXPECT_EQ(env_of(launch::rank_environment(*some, 2), "GROUP_RANK"), "1");
}

TEST(LaunchCommand, MpiGetsAHostfileOfTierAddressesAndAnAgentPerHost) {
  const auto mini = lab_of("mini.toml", "mini");
  auto o = opts("all", NetTier::kAuto);
  o.mpi = true;
  o.mpirun = "/bin/true";  // stands in for mpirun: only its path is looked up here
  o.testbedctl = "/usr/local/bin/testbedctl";
  auto job = launch::prepare_command(mini, o);
  ASSERT_TRUE(job) << job.error().message;
  const std::string hosts = launch::mpi_hostfile(*job);
  const std::string agent = launch::mpi_agent_script(*job, o.testbedctl, "/tmp/tbmpi.x");
  for (size_t i = 0; i < job->ranks.size(); ++i) {
    const auto& r = job->ranks[i];
    EXPECT_NE(hosts.find(r.addr + " slots=1"), std::string::npos) << hosts;
    // Each host its own TMPDIR: the emulated hosts share a host name and /tmp, and orteds
    // sharing Open MPI's session directory race to create it.
    EXPECT_NE(
        agent.find(r.addr + ") node='" + r.node + "' tmp='/tmp/tbmpi.x/" + std::to_string(i) + "'"),
        std::string::npos)
        << agent;
  }
  EXPECT_NE(agent.find("export TMPDIR"), std::string::npos) << agent;
  EXPECT_NE(agent.find("'/usr/local/bin/testbedctl' exec 'mini'"), std::string::npos) << agent;
  const auto& a = job->mpi_argv;
  auto after = [&](const std::string& flag) {
    auto it = std::find(a.begin(), a.end(), flag);
    return it == a.end() || it + 1 == a.end() ? std::string() : *(it + 1);
  };
  EXPECT_EQ(after("-np"), "4");
  EXPECT_EQ(a.back(), "/bin/true");
  std::string joined;
  for (const auto& x : a) joined += x + " ";
  EXPECT_NE(joined.find("btl_tcp_if_include rail"), std::string::npos) << joined;
  EXPECT_NE(joined.find("oob_tcp_if_include rail"), std::string::npos) << joined;
  EXPECT_NE(joined.find("plm_rsh_agent " + job->results_dir + "/rsh-agent"), std::string::npos);
  EXPECT_NE(joined.find("--leave-session-attached"), std::string::npos) << joined;
}

TEST(LaunchCommand, DurationsTakeSecondsMinutesAndHours) {
  EXPECT_EQ(launch::parse_job_duration_ms("10m").value(), 600'000);
  EXPECT_EQ(launch::parse_job_duration_ms("90s").value(), 90'000);
  EXPECT_EQ(launch::parse_job_duration_ms("1h").value(), 3'600'000);
  EXPECT_EQ(launch::parse_job_duration_ms("250ms").value(), 250);
  EXPECT_EQ(launch::parse_job_duration_ms("2").value(), 2000);
  EXPECT_EQ(launch::parse_job_duration_ms("1.5m").value(), 90'000);
  for (const char* bad : {"", "soon", "0", "-1s", "5x", "m"})
    EXPECT_FALSE(launch::parse_job_duration_ms(bad)) << bad;
}

}  // namespace
}  // namespace tb

namespace tb {
namespace {

TEST(CommandProgress, AnIterationEndsWhenEveryReportingRankPrintedItsLine) {
  // Rank 1 prints nothing (it takes no part); rank 2 is one line behind.
  const std::vector<std::vector<int64_t>> marks = {{100, 200, 300}, {}, {150, 260}};
  const auto it = experiment::progress_iterations(marks, 10);
  ASSERT_EQ(it.size(), 2u);
  EXPECT_EQ(it[0].start_ns, 10);
  EXPECT_EQ(it[0].end_ns, 150);
  EXPECT_EQ(it[1].start_ns, 150);
  EXPECT_EQ(it[1].end_ns, 260);
  EXPECT_TRUE(experiment::progress_iterations({{}, {}}, 0).empty());
}

}  // namespace
}  // namespace tb
