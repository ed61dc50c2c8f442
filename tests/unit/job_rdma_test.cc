// --transport rdma in the job, without root: which pairs go over RDMA (mark_rdma_pairs), the job
// file's new fields, and what prepare_job refuses (the flags' exit-2 paths) on the mini lab.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "launch/bench_run.h"
#include "launch/place.h"
#include "plan/plan.h"
#include "report/bench.h"
#include "scenario/loader.h"
#include "workload/bench_result.h"
#include "workload/job.h"

namespace tb {
namespace {

constexpr auto kTcp = workload::Transport::kTcp;
constexpr auto kRdma = workload::Transport::kRdma;

plan::Topology mini_topology() {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/mini.toml");
  EXPECT_TRUE(s) << s.error().message;
  auto p = plan::compile(*s);
  EXPECT_TRUE(p) << p.error().message;
  return p->topo;
}

// mini: dc/s0/g0, dc/s0/g1 (server 0), dc/s1/g0, dc/s1/g1 (server 1), one rail.
workload::Job mini_job(workload::Transport transport) {
  const auto topo = mini_topology();
  workload::Job job;
  job.transport.kind = transport;
  auto gpus = launch::select_ranks(topo, "all");
  EXPECT_TRUE(gpus);
  EXPECT_TRUE(launch::place_ranks(job, topo, *gpus));
  return job;
}

std::vector<apply::RxeDevice> rxe_for(const workload::Job& job, std::vector<int> ranks) {
  std::vector<apply::RxeDevice> out;
  for (int r : ranks) {
    const auto& p = job.ranks[static_cast<size_t>(r)];
    out.push_back({p.node, p.netns, "rail", "rxe" + std::to_string(r), 1, "::ffff:10.0.0.1"});
  }
  return out;
}

TEST(JobRdma, RailPairsWithADeviceOnBothEndsGoOverRdma) {
  auto job = mini_job(kRdma);
  ASSERT_EQ(job.ranks.size(), 4u);
  ASSERT_EQ(job.peers[0][1].tier, "nvl");
  ASSERT_EQ(job.peers[0][2].tier, "rail");
  launch::mark_rdma_pairs(job, rxe_for(job, {0, 1, 2, 3}));
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 4; ++j) {
      const bool rail = i != j && job.peers[i][j].tier == "rail";
      EXPECT_EQ(job.rdma[i][j] != 0, rail) << i << " -> " << j;
    }
  EXPECT_EQ(job.rdma[0][2], 1);
  EXPECT_EQ(job.rdma[2][0], 1);
  EXPECT_EQ(job.rdma[0][1], 0);  // NVLink inside a server stays on TCP
  EXPECT_TRUE(job.rdma_fallback.empty());
  const auto c = workload::count_rdma_pairs(job);
  EXPECT_EQ(c.rail, 4);  // s0/gX <-> s1/gY
  EXPECT_EQ(c.rdma, 4);
}

TEST(JobRdma, APairMissingADeviceStaysOnTcpAndSaysWhy) {
  auto job = mini_job(kRdma);
  launch::mark_rdma_pairs(job, rxe_for(job, {0, 1, 2}));  // none for rank 3 (dc/s1/g1)
  EXPECT_EQ(job.rdma[0][2], 1);
  EXPECT_EQ(job.rdma[0][3], 0);
  EXPECT_EQ(job.rdma[3][0], 0);
  EXPECT_EQ(job.rdma[1][3], 0);
  ASSERT_EQ(job.rdma_fallback.size(), 1u);
  EXPECT_NE(job.rdma_fallback[0].find("rank 3 (dc/s1/g1): no rxe device in " + job.ranks[3].netns),
            std::string::npos)
      << job.rdma_fallback[0];
  EXPECT_NE(job.rdma_fallback[0].find("its 2 rail pair(s) use TCP"), std::string::npos);
  EXPECT_EQ(workload::count_rdma_pairs(job).rdma, 2);
}

TEST(JobRdma, TransportTcpMarksNothing) {
  auto job = mini_job(kTcp);
  launch::mark_rdma_pairs(job, rxe_for(job, {0, 1, 2, 3}));
  for (const auto& row : job.rdma)
    for (char c : row) EXPECT_EQ(c, 0);
  EXPECT_TRUE(job.rdma_fallback.empty());
  EXPECT_EQ(workload::count_rdma_pairs(job).rdma, 0);
}

TEST(JobRdma, JsonRoundTripAndDefaultsForOlderJobs) {
  auto job = mini_job(kRdma);
  job.transport.qps = 4;
  job.transport.ib_timeout = 20;
  job.transport.ib_retry_cnt = 5;
  launch::mark_rdma_pairs(job, rxe_for(job, {0, 1, 2}));
  const auto disk = workload::to_json(job);  // job.json keeps its strings and flat fields
  EXPECT_EQ(disk["impl"], "native");
  EXPECT_EQ(disk["transport"], "rdma");
  EXPECT_EQ(disk["qps"], 4);
  EXPECT_EQ(disk["channels"], 1);
  auto back = workload::job_from_json(disk);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->transport.kind, workload::Transport::kRdma);
  EXPECT_EQ(back->transport.qps, 4);
  EXPECT_EQ(back->transport.ib_timeout, 20);
  EXPECT_EQ(back->transport.ib_retry_cnt, 5);
  EXPECT_EQ(back->rdma, job.rdma);
  EXPECT_EQ(back->rdma_fallback, job.rdma_fallback);

  auto old = workload::to_json(job);  // a job written before the RDMA transport
  for (const char* k : {"transport", "qps", "ib_timeout", "ib_retry_cnt", "rdma", "rdma_fallback"})
    old.erase(k);
  auto d = workload::job_from_json(old);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->transport.kind, workload::Transport::kTcp);
  EXPECT_EQ(d->transport.qps, 1);
  EXPECT_EQ(d->transport.ib_timeout, 14);
  EXPECT_EQ(d->transport.ib_retry_cnt, 7);
  EXPECT_TRUE(d->rdma.empty());

  auto bad = workload::to_json(job);
  bad["transport"] = "carrier-pigeon";
  EXPECT_FALSE(workload::job_from_json(bad));
}

lab::LabState mini_lab(bool with_rxe) {
  lab::LabState st;
  st.lab = "mini";
  st.phase = "up";
  st.topo = mini_topology();
  if (with_rxe) {
    st.rdma = "rxe";
    st.rdma_why = "Soft-RoCE on every GPU rail NIC";
    auto job = mini_job(kRdma);
    st.rxe = rxe_for(job, {0, 1, 2, 3});
  } else {
    st.rdma = "none";
    st.rdma_why = "the kernel has no rdma_rxe module";
  }
  return st;
}

launch::BenchOptions bench_options(workload::Transport transport) {
  launch::BenchOptions o;
  o.transport.kind = transport;
  o.spec.min_bytes = o.spec.max_bytes = 1 << 20;
  return o;
}

std::string refusal(const lab::LabState& st, const launch::BenchOptions& o) {
  auto job = launch::prepare_job(st, o);
  EXPECT_FALSE(job);
  if (job) return "";
  EXPECT_EQ(job.error().exit_code, kExitBadInput) << job.error().message;
  return job.error().message;
}

TEST(BenchFlags, TransportRdmaMarksTheRailPairsOfALabWithRxe) {
  auto o = bench_options(kRdma);
  o.transport.qps = 2;
  auto job = launch::prepare_job(mini_lab(true), o);
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->transport.kind, kRdma);
  EXPECT_EQ(job->transport.qps, 2);
  EXPECT_EQ(workload::count_rdma_pairs(*job).rdma, 4);
  auto tcp = launch::prepare_job(mini_lab(true), bench_options(kTcp));
  ASSERT_TRUE(tcp);
  EXPECT_EQ(workload::count_rdma_pairs(*tcp).rdma, 0);
}

// Two benches of one process in one second: each its own run id, so its own results directory
// and rendezvous store (one shared store let a rank read the earlier run's port).
TEST(BenchFlags, TwoJobsOfOneProcessHaveTheirOwnRunIdAndStore) {
  auto a = launch::prepare_job(mini_lab(false), bench_options(kTcp));
  auto b = launch::prepare_job(mini_lab(false), bench_options(kTcp));
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->run_id, b->run_id);
  EXPECT_NE(a->store_dir, b->store_dir);
  EXPECT_NE(a->results_dir, b->results_dir);
}

TEST(BenchFlags, TransportFlagsAreChecked) {
  const auto lab = mini_lab(true);
  const auto foo = workload::parse_transport_flag("foo");
  ASSERT_FALSE(foo);
  EXPECT_EQ(foo.error().exit_code, kExitBadInput);
  EXPECT_NE(foo.error().message.find("--transport: 'foo' is not tcp or rdma"), std::string::npos);

  auto gloo = bench_options(kRdma);
  gloo.impl = workload::ImplKind::kGloo;
  const auto g = refusal(lab, gloo);
  EXPECT_NE(g.find("sets hop limit 1"), std::string::npos) << g;
  EXPECT_NE(g.find("use --impl native"), std::string::npos) << g;

  auto qps = bench_options(kRdma);
  qps.transport.qps = 0;
  EXPECT_NE(refusal(lab, qps).find("--qps"), std::string::npos);
  auto t = bench_options(kRdma);
  t.transport.ib_timeout = 40;
  EXPECT_NE(refusal(lab, t).find("--ib-timeout"), std::string::npos);
  auto rc = bench_options(kRdma);
  rc.transport.ib_retry_cnt = 9;
  EXPECT_NE(refusal(lab, rc).find("--ib-retry-cnt"), std::string::npos);

  auto tuned_tcp = bench_options(kTcp);
  tuned_tcp.transport.qps = 4;
  EXPECT_NE(refusal(lab, tuned_tcp).find("tune --transport rdma"), std::string::npos);
}

TEST(BenchFlags, TransportRdmaOnALabWithoutRdmaIsRefusedWithTheReason) {
  const auto m = refusal(mini_lab(false), bench_options(kRdma));
  EXPECT_NE(m.find("--transport rdma: lab mini has no RDMA on its rail (the kernel has no "
                   "rdma_rxe module); run `testbedctl doctor` to see why, or use --transport tcp"),
            std::string::npos)
      << m;
  // Ranks of one server have no rail pair at all.
  auto one_server = bench_options(kRdma);
  one_server.ranks = "dc/s0";
  EXPECT_NE(refusal(mini_lab(true), one_server).find("crosses the rail"), std::string::npos);
}

TEST(BenchReport, StatesTheTransportAndTheLabsRdma) {
  workload::BenchResult r;
  r.transport = "rdma";
  r.qps = 2;
  r.ib_timeout = 14;
  r.ib_retry_cnt = 7;
  r.rdma_pairs = 3;
  r.rail_pairs = 4;
  r.rdma_devices = {"rxe0", "rxe1", "rxe2", "-"};
  r.rdma_fallback = {"rank 3 (dc/s1/g1): no rxe device in ns3, so its 2 rail pair(s) use TCP"};
  r.lab_rdma = "rxe";
  r.lab_rdma_why = "Soft-RoCE on every GPU rail NIC";
  const auto h = report::bench_header(r);
  EXPECT_NE(h.find("#  transport rdma: 3 of 4 rail pair(s) over RDMA verbs SEND/RECV (2 QP(s)/"
                   "peer, ib_timeout 14, retry 7)"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("devices by rank: 0=rxe0 1=rxe1 2=rxe2 3=-"), std::string::npos) << h;
  EXPECT_NE(h.find("lab rdma: rxe (Soft-RoCE on every GPU rail NIC)"), std::string::npos) << h;
  EXPECT_NE(h.find("#  tcp fallback: rank 3"), std::string::npos) << h;
  const auto j = report::bench_json(r);
  EXPECT_EQ(j["transport"]["kind"], "rdma");
  EXPECT_EQ(j["transport"]["qps"], 2);
  EXPECT_EQ(j["transport"]["rdma_devices"][2], "rxe2");
  EXPECT_EQ(j["lab_rdma"]["status"], "rxe");
  EXPECT_NE(j["measured"].get<std::string>().find("transport: rdma"), std::string::npos);
}

}  // namespace
}  // namespace tb
