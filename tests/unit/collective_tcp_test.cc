// The native collectives over the TCP transport (ranks as threads on loopback): what only a
// real socket shows — receives served before sends, partial I/O, stripes over channels.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "collective/collective.h"
#include "slow_comm.h"
#include "tcp_ranks.h"

namespace tb::collective {
namespace {

using testing_util::on_tcp;

// In place, every block is both sent and overwritten in one exchange; TCP serves receives
// first, so a block larger than the socket buffers was overwritten before it left — silently,
// before AllToAll staged its outgoing blocks. 4 MiB blocks, 4 ranks, 1 and 3 channels.
TEST(CollectiveTcp, AllToAllInPlace) {
  const int n = 4;
  const size_t count = size_t{1} << 20;  // per block: 4 MiB of int32
  auto v = [](int from, int to, size_t i) {
    return static_cast<int32_t>((from * 31 + to * 7) * 1000003 + static_cast<int32_t>(i));
  };
  for (int channels : {1, 3}) {
    auto st = on_tcp(n, channels, std::chrono::seconds(30), [&](int r, TcpComm& c) -> Status {
      std::vector<int32_t> buf(count * n);
      for (int j = 0; j < n; ++j)
        for (size_t i = 0; i < count; ++i) buf[j * count + i] = v(r, j, i);
      TB_TRY(run(c, Call{Coll::kAllToAll, Algo::kRing, DataType::kInt32, RedOp::kSum, 0, buf.data(),
                         buf.data(), count}));
      size_t wrong = 0;
      for (int j = 0; j < n; ++j)
        for (size_t i = 0; i < count; ++i) wrong += buf[j * count + i] != v(j, r, i);
      if (wrong > 0)
        return fail(std::to_string(wrong) + " wrong elements on rank " + std::to_string(r));
      return {};
    });
    for (auto& s : st) EXPECT_TRUE(s) << "channels " << channels << ": " << s.error().message;
  }
}

}  // namespace
}  // namespace tb::collective

namespace tb::collective {
namespace {

// Halving-doubling on 3 ranks: rank 0 folds its data into rank 1 and waits while ranks 1 and 2
// run the halving and doubling steps, then gets the result back. Rank 2 sits behind a slow link
// (8 KiB pieces, 15 ms apart: about 0.5 s per run, bytes flowing all along), so rank 0 waits
// more than twice the 200 ms timeout with no byte of its own moving.
std::vector<Status> tcp_hd_over_a_slow_link(int stall_after) {
  const size_t count = 64 * 1024;  // 256 KiB of float: 128 KiB per step between ranks 1 and 2
  return on_tcp(3, 1, std::chrono::milliseconds(200), [&](int r, TcpComm& c) -> Status {
    std::vector<float> buf(count, static_cast<float>(r + 1));
    testing_util::SlowComm slow(c, 8192, std::chrono::milliseconds(15), stall_after,
                                std::chrono::milliseconds(800));
    Comm& comm = r == 2 ? static_cast<Comm&>(slow) : c;
    TB_TRY(run(comm, Call{Coll::kAllReduce, Algo::kHalvingDoubling, DataType::kFloat32, RedOp::kSum,
                          0, buf.data(), buf.data(), count}));
    for (size_t i = 0; i < count; ++i)
      if (buf[i] != 6) return fail("rank " + std::to_string(r) + ": wrong result");
    return {};
  });
}

TEST(CollectiveTcp, AFoldedRankWaitsOutASlowLinkWhileTheCollectiveProgresses) {
  auto st = tcp_hd_over_a_slow_link(-1);
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(st[static_cast<size_t>(r)])
        << "rank " << r << ": " << st[static_cast<size_t>(r)].error().message;
}

TEST(CollectiveTcp, ARealStallStillTimesOut) {
  auto st = tcp_hd_over_a_slow_link(4);  // rank 2 stops for 0.8 s (4 timeouts) after 4 pieces
  ASSERT_FALSE(st[0]);
  ASSERT_FALSE(st[1]);
  bool timed_out = false;
  for (int r : {0, 1})
    timed_out = timed_out || st[static_cast<size_t>(r)].error().message.find(
                                 "timed out: no "
                                 "progress for 200 ms") != std::string::npos;
  EXPECT_TRUE(timed_out) << st[0].error().message << " | " << st[1].error().message;
}

}  // namespace
}  // namespace tb::collective
