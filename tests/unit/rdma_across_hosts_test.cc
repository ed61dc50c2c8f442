// --transport rdma between hosts without root (issue 35 item 4; launch/across_hosts.h): every
// host of hz-bj with hz/s3 on host b marks the same rail pairs RDMA (its own rxe devices, and
// the other hosts' assumed from the plan), a joining host whose marks differ from the
// coordinator's says which pair and why, and bench runs RDMA across hosts while `run` still
// refuses it.
#include <gtest/gtest.h>

#include "launch/across_hosts.h"
#include "launch/bench_run.h"
#include "launch/place.h"
#include "plan/plan.h"
#include "plan/rxe.h"
#include "scenario/loader.h"
#include "workload/job.h"

namespace tb {
namespace {

constexpr auto kRdma = workload::Transport::kRdma;

// hz-bj as host `here` sees it: hz/s0..s2 on host a; bj and hz/s3 on host b (the experiment of
// images/labvm/pair-rdma.sh). `rxe`: this host made a device on each of its GPU rail NICs.
lab::LabState split_hzbj(const std::string& here, bool rxe) {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/hz-bj.toml");
  EXPECT_TRUE(s) << s.error().message;
  auto p = plan::compile(*s);
  EXPECT_TRUE(p) << p.error().message;
  lab::LabState st;
  st.lab = p->lab;
  st.topo = p->topo;
  st.phase = "up";
  for (auto& n : st.topo.nodes) n.host = n.region == "hz" && n.server != 3 ? "a" : "b";
  st.host = here;
  st.hosts = {{"a", *parse_ipv4("10.0.0.1")}, {"b", *parse_ipv4("10.0.0.2")}};
  st.rdma = rxe ? "rxe" : "none";
  st.rdma_why = rxe ? "Soft-RoCE on every GPU rail NIC" : "the kernel has no rdma_rxe module";
  if (rxe)
    for (const auto& nic : plan::rail_nics(st.topo))
      if (st.topo.node(nic.node)->host == here)
        st.rxe.push_back({nic.node, nic.netns, nic.ifname, plan::rxe_name(nic.netns, nic.ifname), 1,
                          "::ffff:" + nic.addr.to_string()});
  return st;
}

launch::BenchOptions rdma_bench(const std::string& ranks) {
  launch::BenchOptions o;
  o.transport.kind = kRdma;
  o.ranks = ranks;
  o.spec.min_bytes = o.spec.max_bytes = 1 << 20;
  return o;
}

bool has_device(const std::vector<apply::RxeDevice>& v, const std::string& node) {
  for (const auto& d : v)
    if (d.node == node) return true;
  return false;
}

// A host that made rxe devices counts on the other hosts' GPUs holding theirs; a lab on one
// host, or a host without rxe, counts its own only.
TEST(RdmaAcrossHosts, TheOtherHostsDevicesAreAssumedOnlyWhereThisHostMadeItsOwn) {
  const auto a = split_hzbj("a", true);
  const auto marks = launch::rxe_for_marks(a);
  EXPECT_TRUE(has_device(marks, "hz/s0/g0"));
  EXPECT_TRUE(has_device(marks, "hz/s3/g0"));  // on host b
  EXPECT_TRUE(has_device(marks, "bj/s0/g0"));
  EXPECT_EQ(marks.size(), plan::rail_nics(a.topo).size());
  EXPECT_GT(marks.size(), a.rxe.size());
  const auto none = split_hzbj("a", false);
  EXPECT_TRUE(launch::rxe_for_marks(none).empty());
  auto one_host = a;
  one_host.host.clear();
  one_host.hosts.clear();
  EXPECT_EQ(launch::rxe_for_marks(one_host).size(), a.rxe.size());
}

// hz/s0/g0 (host a) and hz/s3/g0 (host b): their rail pair crosses the seam; both hosts mark it
// RDMA, so the coordinator's job and the joiner's agree; bench's roles allow it.
TEST(RdmaAcrossHosts, BothHostsMarkTheRailPairAcrossTheSeamAlike) {
  const auto a = split_hzbj("a", true), b = split_hzbj("b", true);
  const auto o = rdma_bench("hz/s0/g0,hz/s3/g0");
  auto ja = launch::prepare_job(a, o);
  auto jb = launch::prepare_job(b, o);
  ASSERT_TRUE(ja) << ja.error().message;
  ASSERT_TRUE(jb) << jb.error().message;
  ASSERT_EQ(ja->ranks.size(), 2u);
  EXPECT_EQ(ja->peers[0][1].tier, "rail");
  EXPECT_EQ(ja->rdma[0][1], 1);
  EXPECT_EQ(jb->rdma[0][1], 1);
  EXPECT_TRUE(ja->rdma_fallback.empty());
  EXPECT_EQ(workload::count_rdma_pairs(*ja).rdma, workload::count_rdma_pairs(*jb).rdma);
  EXPECT_EQ(launch::job_digest(*ja), launch::job_digest(*jb));
  auto ha = launch::job_hosts(a, *ja, launch::RdmaAcross::kBench);
  auto hb = launch::job_hosts(b, *jb, launch::RdmaAcross::kBench);
  ASSERT_TRUE(ha) << ha.error().message;
  ASSERT_TRUE(hb) << hb.error().message;
  EXPECT_TRUE(ha->coordinates());
  EXPECT_TRUE(hb->joins());
  EXPECT_EQ(launch::rdma_marks_differ(*ja, *jb, *hb), "");
}

// Four ranks, three of them on host a: every rail pair is marked alike on both hosts, the
// pairs inside host a and the ones across the seam; the NVLink pair stays TCP.
TEST(RdmaAcrossHosts, PairsInsideAHostAndAcrossTheSeamAreMarkedAlike) {
  const auto a = split_hzbj("a", true), b = split_hzbj("b", true);
  const auto o = rdma_bench("hz/s0/g0,hz/s0/g1,hz/s1/g0,hz/s3/g0");
  auto ja = launch::prepare_job(a, o);
  auto jb = launch::prepare_job(b, o);
  ASSERT_TRUE(ja && jb);
  EXPECT_EQ(ja->rdma, jb->rdma);
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 4; ++j)
      EXPECT_EQ(ja->rdma[i][j] != 0, i != j && ja->peers[i][j].tier == "rail") << i << "-" << j;
  EXPECT_EQ(ja->peers[0][1].tier, "nvl");
  EXPECT_EQ(ja->rdma[0][3], 1);  // across the seam
}

// Marks that differ (what each host saw of its own devices alone, before rxe_for_marks) are
// named on the joining host: the pair, both ranks' hosts, each side's transport, the way out.
TEST(RdmaAcrossHosts, AJoinerWhoseMarksDifferFromTheCoordinatorsSaysWhichPair) {
  const auto a = split_hzbj("a", true), b = split_hzbj("b", true);
  const auto o = rdma_bench("hz/s0/g0,hz/s3/g0");
  auto ja = launch::prepare_job(a, o);
  auto jb = launch::prepare_job(b, o);
  ASSERT_TRUE(ja && jb);
  auto hb = launch::job_hosts(b, *jb, launch::RdmaAcross::kBench);
  ASSERT_TRUE(hb);
  auto own_only = *jb;
  launch::mark_rdma_pairs(own_only, b.rxe);  // host b's devices alone: the seam's pairs on TCP
  const auto why = launch::rdma_marks_differ(*ja, own_only, *hb);
  EXPECT_NE(why.find("--transport rdma: host a runs ranks 0 (hz/s0/g0, host a) and 1 (hz/s3/g0, "
                     "host b) over RDMA, this host (b) over TCP"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("or use --transport tcp"), std::string::npos) << why;
  EXPECT_EQ(launch::rdma_marks_differ(*ja, *ja, *hb), "");
}

// A host without rxe has no RDMA pair of its own: bench refuses there, naming why.
TEST(RdmaAcrossHosts, AHostWithoutRxeRefusesWithItsReason) {
  auto job = launch::prepare_job(split_hzbj("b", false), rdma_bench("hz/s0/g0,hz/s3/g0"));
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().exit_code, kExitBadInput);
  EXPECT_NE(job.error().message.find("has no RDMA on its rail (the kernel has no rdma_rxe"),
            std::string::npos)
      << job.error().message;
}

// The roles: bench takes RDMA across hosts; a verb that does not yet (`run`) is exit 2 naming
// the hosts; TCP across hosts, or RDMA on one host, is no concern of this refusal.
TEST(RdmaAcrossHosts, OnlyBenchTakesRdmaAcrossHosts) {
  const auto a = split_hzbj("a", true);
  auto job = launch::prepare_job(a, rdma_bench("hz/s0/g0,hz/s3/g0"));
  ASSERT_TRUE(job);
  auto r = launch::job_hosts(a, *job);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().exit_code, kExitBadInput);
  EXPECT_NE(r.error().message.find("--transport rdma: the selected ranks are on hosts a (1), b "
                                   "(1); this verb does not run RDMA between hosts yet"),
            std::string::npos)
      << r.error().message;
  EXPECT_TRUE(launch::job_hosts(a, *job, launch::RdmaAcross::kBench));
  auto one_host = launch::prepare_job(a, rdma_bench("hz/s0/g0,hz/s1/g0"));
  ASSERT_TRUE(one_host);
  EXPECT_TRUE(launch::job_hosts(a, *one_host));
}

}  // namespace
}  // namespace tb
