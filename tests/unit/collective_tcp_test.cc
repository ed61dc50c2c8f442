// The native collectives over the TCP transport (ranks as threads on loopback): what only a
// real socket shows — receives served before sends, partial I/O, stripes over channels.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "collective/collective.h"
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
