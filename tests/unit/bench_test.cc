// The bench's pieces without root: the TCP transport over loopback (ranks as threads), rank
// selection and per-pair addressing on the shipped scenarios, nccl-tests' arithmetic, the
// correctness pattern, the per-rank loop and the report.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "collective/collective.h"
#include "collective/inproc/inproc.h"
#include "collective/tcp/tcp.h"
#include "launch/bench_run.h"
#include "launch/place.h"
#include "metrics/busbw.h"
#include "plan/plan.h"
#include "report/bench.h"
#include "scenario/loader.h"
#include "tcp_ranks.h"
#include "temp_dir.h"
#include "workload/bench.h"
#include "workload/bench_result.h"
#include "workload/job.h"
#include "workload/native_impl.h"
#include "workload/pattern.h"

namespace tb {
namespace {

using collective::Algo;
using collective::Call;
using collective::Coll;
using collective::DataType;
using collective::RedOp;

using testing_util::on_tcp;
using testing_util::TempDir;

TEST(TcpComm, AllReduceOverLoopbackWithChannels) {
  const int n = 4;
  const size_t count = 300'001;  // odd, and big enough to stripe over the channels
  for (Algo algo : {Algo::kRing, Algo::kHalvingDoubling, Algo::kTree}) {
    auto st = on_tcp(n, 3, std::chrono::seconds(10), [&](int r, collective::TcpComm& c) -> Status {
      std::vector<float> buf(count);
      for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((r + 1) * (i % 5));
      TB_TRY(collective::run(c, Call{Coll::kAllReduce, algo, DataType::kFloat32, RedOp::kSum, 0,
                                     buf.data(), buf.data(), count}));
      for (size_t i = 0; i < count; ++i)
        if (buf[i] != static_cast<float>(10 * (i % 5)))
          return fail("wrong at " + std::to_string(i));
      return {};
    });
    for (auto& s : st) EXPECT_TRUE(s) << s.error().message;
  }
}

TEST(TcpComm, APeerThatDiesFailsTheOthersFastWithItsName) {
  const auto t0 = std::chrono::steady_clock::now();
  auto st = on_tcp(3, 2, std::chrono::seconds(20), [&](int r, collective::TcpComm& c) -> Status {
    if (r == 1) return fail("rank 1 dies");  // its comm closes its connections as it goes
    std::vector<float> buf(1 << 20, 1.0f);
    return collective::run(c, Call{Coll::kAllReduce, Algo::kRing, DataType::kFloat32, RedOp::kSum,
                                   0, buf.data(), buf.data(), buf.size()});
  });
  // Not the 20 s timeout: a peer's close is seen at once; 5 s is the threads' start-up and a
  // loaded machine with room, and a quarter of what waiting out the timeout would take.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  for (int r : {0, 2}) {
    ASSERT_FALSE(st[static_cast<size_t>(r)]);
    EXPECT_NE(st[static_cast<size_t>(r)].error().message.find("(it exited or failed)"),
              std::string::npos)
        << st[static_cast<size_t>(r)].error().message;
  }
}

TEST(TcpComm, SilentPeerTimesOut) {
  auto st =
      on_tcp(2, 1, std::chrono::milliseconds(300), [&](int r, collective::TcpComm& c) -> Status {
        if (r == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1200));
          return {};
        }
        float x = 1;
        return collective::run(
            c, Call{Coll::kAllReduce, Algo::kRing, DataType::kFloat32, RedOp::kSum, 0, &x, &x, 1});
      });
  ASSERT_FALSE(st[0]);
  EXPECT_NE(st[0].error().message.find("no progress for 300 ms"), std::string::npos)
      << st[0].error().message;
}

TEST(TcpComm, MissingRankFailsRendezvousWithinTimeout) {
  TempDir dir;
  collective::TcpOptions o;
  o.rank = 1;
  o.size = 2;
  o.timeout = std::chrono::milliseconds(300);
  o.peers.assign(2, {"127.0.0.1", "127.0.0.1", "lo"});
  auto c = collective::TcpComm::connect(collective::FileStore(dir.path()), o);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("did that rank start?"), std::string::npos) << c.error().message;
}

TEST(Busbw, NcclTestsFactorsAndSizes) {
  EXPECT_DOUBLE_EQ(metrics::bus_factor(Coll::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(metrics::bus_factor(Coll::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(metrics::bus_factor(Coll::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(metrics::bus_factor(Coll::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(metrics::bus_factor(Coll::kBroadcast, 8), 1);
  EXPECT_DOUBLE_EQ(metrics::bus_factor(Coll::kSendRecv, 8), 1);
  // AllGather's size column is the whole output: 8K over 4 ranks is 512 floats each.
  EXPECT_EQ(metrics::count_for(Coll::kAllGather, 8192, 4, DataType::kFloat32), 512u);
  EXPECT_EQ(metrics::size_bytes(Coll::kAllGather, 512, 4, DataType::kFloat32), 8192u);
  EXPECT_EQ(metrics::count_for(Coll::kAllReduce, 8192, 4, DataType::kFloat32), 2048u);
  auto bw = metrics::bandwidth(Coll::kAllReduce, 1'000'000, 1000, 4);  // 1 MB in 1 ms
  EXPECT_DOUBLE_EQ(bw.algbw_gbps, 1.0);
  EXPECT_DOUBLE_EQ(bw.busbw_gbps, 1.5);
}

TEST(Bench, SweepFollowsMinMaxAndFactor) {
  workload::BenchSpec s;
  s.min_bytes = 8 << 10;
  s.max_bytes = 64 << 20;
  EXPECT_EQ(workload::sweep(s, 4).size(), 14u);
  s.coll = Coll::kAllToAll;
  s.min_bytes = 1;
  s.max_bytes = 64;
  auto pts = workload::sweep(s, 4);  // tiny sizes collapse to count 1, kept once
  EXPECT_EQ(pts.front().count, 1u);
  EXPECT_EQ(pts.front().bytes, 16u);
  s.step_factor = 1;
  EXPECT_FALSE(workload::validate(s));
  s.step_factor = 2;
  s.op = RedOp::kProd;
  EXPECT_FALSE(workload::validate(s));
}

// An Impl that wraps another and forwards everything; subclasses spoil results.
class Wrapping : public workload::Impl {
 public:
  explicit Wrapping(std::unique_ptr<workload::Impl> in) : in_(std::move(in)) {}
  int rank() const override { return in_->rank(); }
  int size() const override { return in_->size(); }
  Status supports(Coll c, Algo a) const override { return in_->supports(c, a); }
  Algo default_algo(Coll c) const override { return in_->default_algo(c); }
  std::string algo_label(const Call& c) const override { return in_->algo_label(c); }
  std::string describe() const override { return "wrapping"; }
  Status run(const Call& c) override { return in_->run(c); }

 protected:
  std::unique_ptr<workload::Impl> in_;
};

// Breaks one element of every result (AllReduce: out of place only): the check must see it.
class Corrupting final : public Wrapping {
 public:
  using Wrapping::Wrapping;
  Status run(const Call& c) override {
    TB_TRY(in_->run(c));
    if (c.count > 1 && c.coll != Coll::kAllReduce) static_cast<float*>(c.recv)[0] += 1;
    if (c.count > 1 && c.coll == Coll::kAllReduce && c.recv != c.send)
      static_cast<float*>(c.recv)[1] += 1;
    return {};
  }
};

// Leans on its first call's buffer: later calls of the same size return what that buffer
// holds (a result cache keyed by size, a scratch pointer kept across calls). Calls at the
// first call's offset look right; only a check at a shifted offset sees it.
class Stale final : public Wrapping {
 public:
  using Wrapping::Wrapping;
  Status run(const Call& c) override {
    TB_TRY(in_->run(c));
    if (c.count < 2) return {};  // the barrier
    auto [it, fresh] = first_.try_emplace(c.count, c.recv);
    if (!fresh && it->second != c.recv)
      std::memcpy(c.recv, it->second, c.count * collective::type_size(c.type));
    return {};
  }

 private:
  std::map<uint64_t, void*> first_;
};

using Wrap = std::function<std::unique_ptr<workload::Impl>(std::unique_ptr<workload::Impl>)>;

// Rows with #wrong summed over ranks (out of place and in place).
std::vector<workload::RankRow> bench_on_threads(int n, const workload::BenchSpec& spec,
                                                const Wrap& wrap = {}) {
  auto comms = collective::make_inproc_comms(n);
  std::vector<std::vector<workload::RankRow>> rows(static_cast<size_t>(n));
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      std::unique_ptr<workload::Impl> impl =
          workload::make_native_impl(std::move(comms[static_cast<size_t>(r)]), "inproc");
      if (wrap) impl = wrap(std::move(impl));
      auto st = workload::run_bench(*impl, spec, [&](const workload::RankRow& row) {
        rows[static_cast<size_t>(r)].push_back(row);
      });
      EXPECT_TRUE(st) << st.error().message;
    });
  for (auto& t : th) t.join();
  std::vector<workload::RankRow> out;
  for (size_t i = 0; i < rows[0].size(); ++i) {
    workload::RankRow sum = rows[0][i];
    for (int r = 1; r < n; ++r) {
      sum.wrong += rows[static_cast<size_t>(r)][i].wrong;
      sum.ip_wrong += rows[static_cast<size_t>(r)][i].ip_wrong;
    }
    out.push_back(sum);
  }
  return out;
}

template <class W>
Wrap wrap_with() {
  return [](std::unique_ptr<workload::Impl> in) { return std::make_unique<W>(std::move(in)); };
}

TEST(Bench, EveryCollectiveChecksCleanInAndOutOfPlaceAndTimesEveryIteration) {
  for (Coll c : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast,
                 Coll::kReduce, Coll::kAllToAll, Coll::kSendRecv}) {
    workload::BenchSpec s;
    s.coll = c;
    s.min_bytes = 1000;
    s.max_bytes = 100'000;
    s.step_factor = 10;
    s.iters = 3;
    s.warmup = 1;
    s.check = 2;
    s.root = 2;
    s.op = RedOp::kMax;
    auto rows = bench_on_threads(3, s);
    ASSERT_EQ(rows.size(), 3u) << collective::name(c);
    for (const auto& r : rows) {
      EXPECT_EQ(r.wrong, 0u) << collective::name(c) << " " << r.bytes;
      EXPECT_EQ(r.ip_wrong, 0u) << collective::name(c) << " in place " << r.bytes;
      ASSERT_TRUE(r.in_place);
      ASSERT_EQ(r.iter_ns.size(), 3u);
      ASSERT_EQ(r.ip_iter_ns.size(), 3u);
      EXPECT_LE(r.iter_ns[0].first, r.iter_ns[0].second);
      EXPECT_LE(r.iter_ns[0].second, r.iter_ns[1].first);
      EXPECT_LE(r.iter_ns[2].second, r.ip_iter_ns[0].first);  // in place after out of place
    }
  }
}

TEST(Bench, AWrongResultIsCountedBeforeAndAfterTiming) {
  workload::BenchSpec s;
  s.coll = Coll::kAllGather;
  s.min_bytes = s.max_bytes = 4096;
  s.iters = 1;
  s.check = 3;
  auto rows = bench_on_threads(2, s, wrap_with<Corrupting>());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].wrong, 12u);     // one element x (3 + 3) check runs x 2 ranks
  EXPECT_EQ(rows[0].ip_wrong, 12u);  // and the same in place
  s.coll = Coll::kAllReduce;         // Corrupting spoils AllReduce out of place only
  rows = bench_on_threads(2, s, wrap_with<Corrupting>());
  EXPECT_EQ(rows[0].wrong, 12u);
  EXPECT_EQ(rows[0].ip_wrong, 0u);
}

// Buffers shift between iterations, and the checks after timing run at another offset than
// those before: an implementation that returns a previous call's buffer is caught there.
TEST(Bench, ShiftedBuffersCatchAnImplementationLeaningOnAnEarlierCall) {
  workload::BenchSpec s;
  s.coll = Coll::kAllReduce;
  s.min_bytes = 1000;
  s.max_bytes = 100'000;
  s.step_factor = 10;
  s.iters = 3;
  s.warmup = 0;
  s.check = 1;
  auto rows = bench_on_threads(2, s, wrap_with<Stale>());
  ASSERT_EQ(rows.size(), 3u);
  // The two smaller sizes shift (the largest has one offset): wrong, and only after timing.
  EXPECT_GT(rows[0].wrong, rows[0].count);
  EXPECT_GT(rows[1].wrong, rows[1].count);
  EXPECT_EQ(rows[2].wrong, 0u);
  s.check = 0;  // without the checks nothing is counted
  rows = bench_on_threads(2, s, wrap_with<Stale>());
  EXPECT_EQ(rows[0].wrong, 0u);
}

TEST(BenchReport, CombinesRanksLikeNcclTests) {
  workload::RankRow a{1'000'000, 250'000, 1000, 0, {{10, 20}, {20, 40}}};
  workload::RankRow b{1'000'000, 250'000, 3000, 2, {{12, 25}, {25, 38}}};
  auto row = workload::combine_rows(Coll::kAllReduce, 2, {a, b});
  EXPECT_DOUBLE_EQ(row.time_us, 2000);
  EXPECT_EQ(row.wrong, 2u);
  EXPECT_DOUBLE_EQ(row.algbw_gbps, 0.5);
  EXPECT_DOUBLE_EQ(row.busbw_gbps, 0.5);
  ASSERT_EQ(row.iter_ns.size(), 2u);
  EXPECT_EQ(row.iter_ns[1], (std::pair<int64_t, int64_t>{20, 40}));
  workload::BenchResult r;
  r.spec.coll = Coll::kAllReduce;
  r.rows = {row};
  r.complete = true;
  EXPECT_FALSE(r.ok());  // 2 wrong
  EXPECT_NE(report::bench_row(r, row).find("1000000"), std::string::npos);
  EXPECT_NE(report::bench_footer(r).find("FAILED"), std::string::npos);
  auto j = report::bench_json(r);
  EXPECT_EQ(j["rows"][0]["iterations"].size(), 2u);
  EXPECT_EQ(j["wrong"], 2);
  EXPECT_FALSE(j["rows"][0].contains("in_place"));  // not measured: columns "-"
  EXPECT_NE(report::bench_row(r, row).find("  -  "), std::string::npos);
}

TEST(BenchReport, InPlaceColumnsBesideOutOfPlaceLikeNcclTests) {
  workload::RankRow a{1'000'000, 250'000, 1000, 0, {{10, 20}}, true, 2000, 3, {{30, 40}}};
  workload::RankRow b{1'000'000, 250'000, 1000, 0, {{11, 21}}, true, 2000, 1, {{31, 41}}};
  auto row = workload::combine_rows(Coll::kAllReduce, 2, {a, b});
  ASSERT_TRUE(row.in_place);
  EXPECT_DOUBLE_EQ(row.in_place->time_us, 2000);
  EXPECT_DOUBLE_EQ(row.in_place->algbw_gbps, 0.5);
  EXPECT_EQ(row.in_place->wrong, 4u);
  EXPECT_EQ(row.in_place->iter_ns[0], (std::pair<int64_t, int64_t>{30, 41}));
  workload::BenchResult r;
  r.spec.coll = Coll::kAllReduce;
  r.rows = {row};
  r.complete = true;
  EXPECT_EQ(r.wrong(), 4u);
  EXPECT_DOUBLE_EQ(r.avg_busbw(), (1.0 + 0.5) / 2);  // both placements, as nccl-tests
  const std::string header = report::bench_header(r);
  EXPECT_NE(header.find("out-of-place"), std::string::npos) << header;
  EXPECT_NE(header.find("in-place"), std::string::npos) << header;
  const std::string line = report::bench_row(r, row);
  EXPECT_NE(line.find("2000.0"), std::string::npos) << line;  // the in-place time
  auto j = report::bench_json(r);
  EXPECT_EQ(j["rows"][0]["in_place"]["wrong"], 4);
  EXPECT_DOUBLE_EQ(j["rows"][0]["in_place"]["time_us"].get<double>(), 2000);
  EXPECT_EQ(j["rows"][0]["in_place"]["iterations"].size(), 1u);
  // The rank rows round-trip through tb-rank's JSON lines.
  auto back = workload::rank_row_from_json(workload::to_json(a));
  EXPECT_TRUE(back.in_place);
  EXPECT_EQ(back.ip_wrong, 3u);
  EXPECT_EQ(back.ip_iter_ns, a.ip_iter_ns);
}

plan::Topology topology_of(const std::string& scenario) {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/" + scenario);
  EXPECT_TRUE(s) << s.error().message;
  auto p = plan::compile(*s);
  EXPECT_TRUE(p) << p.error().message;
  return p->topo;
}

std::string addr(const plan::Node& n, const std::string& role) {
  for (const auto& [r, p] : n.addrs)
    if (r == role) return p.addr.to_string();
  return "";
}

TEST(Job, SelectsRanksAndBindsEachPairToItsTier) {
  const auto topo = topology_of("mini.toml");
  auto all = launch::select_ranks(topo, "all");
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 4u);
  auto s0 = launch::select_ranks(topo, "dc-s1,dc/s0/g0");
  ASSERT_TRUE(s0);
  ASSERT_EQ(s0->size(), 3u);
  EXPECT_EQ((*s0)[0]->name, "dc/s0/g0");  // topology order
  auto bad = launch::select_ranks(topo, "dc/s9");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().exit_code, kExitBadInput);
  EXPECT_NE(bad.error().message.find("'dc/s9' matches no GPU"), std::string::npos);

  workload::Job job;
  ASSERT_TRUE(launch::place_ranks(job, topo, *all));
  const auto& g0 = *(*all)[0];
  const auto& g1 = *(*all)[1];
  const auto& h0 = *(*all)[2];
  EXPECT_EQ(job.peers[0][1].tier, "nvl");
  EXPECT_EQ(job.peers[0][1].dst, addr(g1, "nvl"));
  EXPECT_EQ(job.peers[0][1].src, addr(g0, "nvl"));
  EXPECT_EQ(job.peers[0][2].tier, "rail");
  EXPECT_EQ(job.peers[0][2].dst, addr(h0, "rail"));
  EXPECT_EQ(job.peers[0][2].src, addr(g0, "rail"));
  EXPECT_EQ(job.ranks[2].server, 1);
  EXPECT_EQ(job.ranks[0].gloo_addr, addr(g0, "rail"));  // one region: Gloo on the rail
  auto back = workload::job_from_json(workload::to_json(job));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->peers[0][2].dst, job.peers[0][2].dst);
}

TEST(Job, CrossRegionPairsGoOverTheWan) {
  const auto topo = topology_of("hz-bj.toml");
  auto gpus = launch::select_ranks(topo, "hz/s0/g0,bj/s0/g0");
  ASSERT_TRUE(gpus);
  workload::Job job;
  ASSERT_TRUE(launch::place_ranks(job, topo, *gpus));
  EXPECT_EQ(job.peers[0][1].tier, "wan");
  EXPECT_EQ(job.peers[0][1].dst, addr(*(*gpus)[1], "nvl"));
  EXPECT_EQ(job.ranks[0].gloo_addr, addr(*(*gpus)[0], "nvl"));  // two regions: routable one
}

// bench --tier frontend (issue 14's figure: bench's busbw on the tier launch --tier frontend
// uses): pairs on two servers of a region leave the rail for the frontend, from and to the GPUs'
// NVLink-side addresses, which their servers route over the VPC; same-server pairs stay on
// NVLink and cross-region pairs on the WAN.
TEST(Job, FrontendTierMovesCrossServerPairsOffTheRail) {
  const auto topo = topology_of("mini.toml");
  auto all = launch::select_ranks(topo, "all");
  ASSERT_TRUE(all);
  workload::Job job;
  ASSERT_TRUE(launch::place_ranks(job, topo, *all, /*frontend=*/true));
  const auto& g0 = *(*all)[0];
  const auto& g1 = *(*all)[1];
  const auto& h0 = *(*all)[2];
  EXPECT_EQ(job.peers[0][1].tier, "nvl");
  EXPECT_EQ(job.peers[0][1].dst, addr(g1, "nvl"));
  EXPECT_EQ(job.peers[0][2].tier, "frontend");
  EXPECT_EQ(job.peers[0][2].dst, addr(h0, "nvl"));
  EXPECT_EQ(job.peers[0][2].src, addr(g0, "nvl"));
  EXPECT_EQ(job.peers[2][0].dst, addr(g0, "nvl"));
  EXPECT_EQ(job.ranks[0].gloo_addr, addr(g0, "nvl"));  // Gloo off the rail too
  for (const auto& row : job.peers)
    for (const auto& p : row) EXPECT_NE(p.tier, "rail");

  const auto hzbj = topology_of("hz-bj.toml");
  auto two = launch::select_ranks(hzbj, "hz/s0/g0,bj/s0/g0");
  ASSERT_TRUE(two);
  workload::Job wan;
  ASSERT_TRUE(launch::place_ranks(wan, hzbj, *two, true));
  EXPECT_EQ(wan.peers[0][1].tier, "wan");

  launch::BenchOptions o;
  o.tier = "rail";
  auto bad = launch::check_options(o);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().exit_code, kExitBadInput);
  EXPECT_NE(bad.error().message.find("--tier: 'rail' is not a bench tier; use auto"),
            std::string::npos)
      << bad.error().message;
  o.tier = "frontend";
  EXPECT_TRUE(launch::check_options(o));
  o.transport.kind = workload::Transport::kRdma;
  auto rdma = launch::check_options(o);
  ASSERT_FALSE(rdma);
  EXPECT_NE(rdma.error().message.find("--tier frontend: RDMA runs on rail pairs only"),
            std::string::npos)
      << rdma.error().message;
}

}  // namespace
}  // namespace tb
