// A timing check run by hand, not an assertion (disabled by default):
//   netns_tests --gtest_also_run_disabled_tests --gtest_filter='*SetupTiming*'
// Builds the ring of limits.md section 1 (N namespaces, veth i <-> i+1 mod N, a /31 on each
// end, lo and both ends up, every object with its owner alias) three times and prints the cost
// per namespace + link, to compare with `ip -batch` (~3 ms) and the ~1 ms kernel floor.
// TB_TIMING_N overrides N (default 200).
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "netns_fixture.h"

namespace tb::testing {
namespace {

class SetupTiming : public NetnsTest {};

TEST_F(SetupTiming, DISABLED_RingOfNamespaces) {
  const char* env = std::getenv("TB_TIMING_N");
  const int n = env ? std::atoi(env) : 200;
  ASSERT_GT(n, 2);
  ASSERT_LE(n, 8000);  // /31s from 198.18.0.0/15
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(ns("r" + std::to_string(i)));
  const std::string mk = marker("timing");
  std::vector<plan::Op> ops;
  for (int i = 0; i < n; ++i) ops.push_back(plan::CreateNetns{names[i], "n", mk + "node=n"});
  for (int i = 0; i < n; ++i) {
    const std::string& a = names[i];
    const std::string& b = names[(i + 1) % n];
    ops.push_back(plan::CreateVeth{{a, "r", mk + "right", ""}, {b, "l", mk + "left", ""}, 1500});
    const uint32_t base = 0xC6120000u + 2u * static_cast<uint32_t>(i);  // 198.18.0.0 + 2i
    ops.push_back(plan::AddAddr{a, "r", Prefix{Ipv4{base}, 31}});
    ops.push_back(plan::AddAddr{b, "l", Prefix{Ipv4{base + 1}, 31}});
  }
  for (int run = 0; run < 3; ++run) {
    kernel_ = std::make_unique<apply::NetlinkKernel>();
    using clock = std::chrono::steady_clock;
    auto t0 = clock::now();
    for (const auto& op : ops) ASSERT_TRUE(kernel_->submit(op));
    auto synced = kernel_->sync();
    ASSERT_TRUE(synced) << synced.error().message;
    auto t1 = clock::now();
    for (const auto& name : names) ASSERT_TRUE(kernel_->undo(plan::CreateNetns{name, "", ""}));
    auto t2 = clock::now();
    const double up = std::chrono::duration<double>(t1 - t0).count();
    const double down = std::chrono::duration<double>(t2 - t1).count();
    std::printf("run %d: N=%d setup %.3f s = %.3f ms per ns+link; teardown %.3f s\n", run, n, up,
                1e3 * up / n, down);
  }
}

}  // namespace
}  // namespace tb::testing
