// --ports spread (bench; exercise 3): a rail pair's channels bound to the GPU NIC's ports in
// turn where both GPUs have several ports on the same ToRs (launch::bind_ports), carried in
// job.json, and TcpComm binding each channel (SO_BINDTODEVICE) at both ends, with the listener of
// the channel's port accepting it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "collective/collective.h"
#include "collective/tcp/tcp.h"
#include "launch/bench_run.h"
#include "launch/place.h"
#include "plan/plan.h"
#include "scenario/loader.h"
#include "temp_dir.h"
#include "workload/job.h"

namespace tb {
namespace {

using testing_util::TempDir;

plan::Topology topology_of(const std::string& path) {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/" + path);
  EXPECT_TRUE(s) << s.error().message;
  auto p = plan::compile(*s);
  EXPECT_TRUE(p) << p.error().message;
  return p->topo;
}

workload::Job placed(const plan::Topology& topo, std::vector<const plan::Node*>* gpus) {
  auto g = launch::select_ranks(topo, "all");
  EXPECT_TRUE(g);
  *gpus = *g;
  workload::Job job;
  EXPECT_TRUE(launch::place_ranks(job, topo, *gpus));
  return job;
}

// Exercise 3's lab: two GPUs, each NIC with raila on tor0a and railb on tor0b.
TEST(PortBinding, DualTorRailPairGetsBothPortsInToROrder) {
  const auto topo = topology_of("exercises/03-untuned-collectives/scenario.toml");
  std::vector<const plan::Node*> gpus;
  auto job = placed(topo, &gpus);
  ASSERT_EQ(gpus.size(), 2u);
  ASSERT_EQ(job.peers[0][1].tier, "rail");
  EXPECT_TRUE(job.peers[0][1].ports.empty());  // place_ranks alone binds nothing
  EXPECT_EQ(launch::bind_ports(job, topo, gpus), 2);
  EXPECT_EQ(job.peers[0][1].ports, (std::vector<std::string>{"raila", "railb"}));
  EXPECT_EQ(job.peers[1][0].ports, (std::vector<std::string>{"raila", "railb"}));
  EXPECT_TRUE(job.peers[0][0].ports.empty());

  // job.json keeps the ports; a pair without them has three fields as before.
  job.transport.spread_ports = true;
  const auto j = workload::to_json(job);
  EXPECT_EQ(j.at("ports"), "spread");
  EXPECT_EQ(j.at("peers")[0][1].size(), 4u);
  EXPECT_EQ(j.at("peers")[0][0].size(), 3u);
  auto back = workload::job_from_json(j);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(back->transport.spread_ports);
  EXPECT_EQ(back->peers[1][0].ports, job.peers[1][0].ports);
  EXPECT_TRUE(back->peers[0][0].ports.empty());
}

// vpc-vs-hpn: dual ToR, two rails joined by a spine. Only pairs on one rail (same two ToRs) are
// bound; pairs inside a server (NVLink) and across rails (the spine picks the far end's ToR)
// are not. mini (one ToR per rail) has nothing to bind.
TEST(PortBinding, OnlyPairsSharingBothToRs) {
  const auto topo = topology_of("scenarios/vpc-vs-hpn.toml");
  std::vector<const plan::Node*> gpus;
  auto job = placed(topo, &gpus);
  const int bound = launch::bind_ports(job, topo, gpus);
  EXPECT_GT(bound, 0);
  int checked = 0;
  for (size_t i = 0; i < gpus.size(); ++i)
    for (size_t j = 0; j < gpus.size(); ++j) {
      if (i == j) continue;
      const bool same_rail = gpus[i]->server != gpus[j]->server &&
                             gpus[i]->index % 2 == gpus[j]->index % 2;  // rails = 2
      SCOPED_TRACE(gpus[i]->name + " -> " + gpus[j]->name);
      EXPECT_EQ(!job.peers[i][j].ports.empty(), same_rail);
      checked += same_rail ? 1 : 0;
    }
  EXPECT_EQ(bound, checked);

  const auto mini = topology_of("scenarios/mini.toml");
  auto mjob = placed(mini, &gpus);
  EXPECT_EQ(launch::bind_ports(mjob, mini, gpus), 0);
}

TEST(PortBinding, GlooCannotSpreadPorts) {
  launch::BenchOptions o;
  o.impl = workload::ImplKind::kGloo;
  o.transport.spread_ports = true;
  auto st = launch::check_options(o);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().exit_code, kExitBadInput);
  EXPECT_NE(st.error().message.find("--ports spread"), std::string::npos) << st.error().message;
}

// Two ranks on loopback, each giving the other `ports[rank]`; returns each rank's status after
// an AllReduce over `channels` channels (checked).
std::vector<Status> allreduce_with_ports(int channels,
                                         const std::vector<std::vector<std::string>>& ports) {
  TempDir dir;
  collective::FileStore store(dir.path());
  std::vector<Status> st(2);
  std::vector<std::thread> th;
  for (int r = 0; r < 2; ++r)
    th.emplace_back([&, r] {
      collective::TcpOptions o;
      o.rank = r;
      o.size = 2;
      o.channels = channels;
      o.timeout = std::chrono::seconds(3);
      o.peers.assign(2, {"127.0.0.1", "127.0.0.1", "rail", ports[static_cast<size_t>(r)]});
      auto c = collective::TcpComm::connect(store, o);
      if (!c) {
        st[static_cast<size_t>(r)] = std::unexpected(c.error());
        return;
      }
      const size_t count = 200'001;  // big enough to stripe over every channel
      std::vector<float> buf(count, static_cast<float>(r + 1));
      auto s = collective::run(
          **c, collective::Call{collective::Coll::kAllReduce, collective::Algo::kRing,
                                collective::DataType::kFloat32, collective::RedOp::kSum, 0,
                                buf.data(), buf.data(), count});
      if (s)
        for (size_t i = 0; i < count; ++i)
          if (buf[i] != 3.0f) {
            s = fail("wrong at " + std::to_string(i));
            break;
          }
      st[static_cast<size_t>(r)] = s;
    });
  for (auto& t : th) t.join();
  return st;
}

TEST(PortBinding, BoundChannelsCarryTheCollective) {
  // Three channels over two "ports" (both loopback): channel 0 and 2 on the first name.
  for (auto& s : allreduce_with_ports(3, {{"lo", "lo"}, {"lo", "lo"}}))
    EXPECT_TRUE(s) << s.error().message;
}

TEST(PortBinding, EndsThatDisagreeFailNamingThePort) {
  // Rank 1 dials unbound; rank 0 expects channel 0 on its listener of port "lo".
  auto st = allreduce_with_ports(1, {{"lo"}, {}});
  ASSERT_FALSE(st[0]);
  EXPECT_NE(st[0].error().message.find("expected port lo"), std::string::npos)
      << st[0].error().message;
}

TEST(PortBinding, AnInterfaceThatIsNotThereIsNamed) {
  auto st = allreduce_with_ports(2, {{"tbnodev0"}, {"tbnodev0"}});
  for (auto& s : st) {
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message.find("tbnodev0"), std::string::npos) << s.error().message;
  }
}

}  // namespace
}  // namespace tb
