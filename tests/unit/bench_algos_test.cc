// The bench loop (checks before and after timing, in and out of place, shifted offsets) over
// every collective and native algorithm on the bounded in-process transport: what `testbedctl
// bench` checks on a lab, checked here without one.
#include <gtest/gtest.h>

#include <thread>

#include "collective/collective.h"
#include "collective/inproc/inproc.h"
#include "workload/bench.h"
#include "workload/native_impl.h"

namespace tb::workload {
namespace {

using collective::Algo;
using collective::Coll;

// Runs the sweep on n ranks; returns #wrong over ranks, sizes and placements (-1: a rank failed).
int64_t wrong_over_bench(int n, const BenchSpec& spec, const std::vector<int>& node_of) {
  collective::InprocOptions o;
  o.timeout = std::chrono::seconds(10);
  o.stream_bytes = collective::kInprocBoundedBytes;
  o.channels = 2;
  o.min_stripe = 2048;
  auto comms = collective::make_inproc_comms(n, o);
  std::vector<int64_t> wrong(static_cast<size_t>(n), 0);
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      comms[static_cast<size_t>(r)]->set_node_of(node_of);
      auto impl = make_native_impl(std::move(comms[static_cast<size_t>(r)]), "inproc bounded");
      int rows = 0;
      auto st = run_bench(*impl, spec, [&](const RankRow& row) {
        wrong[static_cast<size_t>(r)] += static_cast<int64_t>(row.wrong + row.ip_wrong);
        rows += row.in_place ? 1 : 0;
      });
      if (!st || rows == 0) wrong[static_cast<size_t>(r)] = -1;
      EXPECT_TRUE(st) << st.error().message;
    });
  for (auto& t : th) t.join();
  int64_t sum = 0;
  for (int64_t w : wrong) {
    if (w < 0) return -1;
    sum += w;
  }
  return sum;
}

TEST(BenchAlgos, EveryCollectiveAndAlgorithmChecksCleanInAndOutOfPlaceOnTheBoundedTransport) {
  for (Coll c : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast,
                 Coll::kReduce, Coll::kAllToAll, Coll::kSendRecv})
    for (Algo a : collective::native_algos(c))
      for (int n : {3, 4}) {
        BenchSpec s;
        s.coll = c;
        s.algo = a;
        s.min_bytes = 4000;  // 1000 floats, then 8500
        // Over tree's 256 KiB chunk for the chains and trees of Broadcast and Reduce.
        s.max_bytes = collective::rooted(c) ? 300'000 : 40'000;
        s.step_factor = 8.5;
        s.iters = 2;
        s.warmup = 1;
        s.check = 1;
        s.root = n - 1;
        s.op = n == 3 ? collective::RedOp::kMin : collective::RedOp::kSum;
        const std::vector<int> node_of =
            n == 4 ? std::vector<int>{0, 0, 1, 1} : std::vector<int>{0, 0, 0};
        EXPECT_EQ(wrong_over_bench(n, s, node_of), 0)
            << collective::name(c) << " " << collective::name(a) << " n=" << n;
      }
}

}  // namespace
}  // namespace tb::workload
