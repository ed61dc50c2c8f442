// Every native collective x algorithm x rank counts 1..9 x odd sizes, ranks as threads over
// the in-process transport, with integer-valued data so results are exact in any order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "collective/algorithms.h"
#include "collective/collective.h"
#include "collective/inproc/inproc.h"
#include "collective/shm/shm.h"
#include "slow_comm.h"
#include "temp_dir.h"

namespace tb::collective {
namespace {

// Input element i of rank r, the same formula the test's reference uses.
double value(int r, size_t i) {
  return static_cast<double>((r * 7 + static_cast<int>(i % 97) * 3) % 23) - 11;
}

template <class T>
T combine(RedOp op, T a, T b) {
  switch (op) {
    case RedOp::kSum:
      return a + b;
    case RedOp::kMin:
      return std::min(a, b);
    case RedOp::kMax:
      return std::max(a, b);
    case RedOp::kProd:
      return a * b;
  }
  return a;
}

struct Case {
  Coll coll;
  Algo algo;
  DataType type;
  RedOp op;
  int n;
  size_t count;
  int root;
  int local;  // ranks per node (hier)
  bool in_place;
};

// The transport a case runs on: the unbounded in-process one, or the bounded one (a sender
// blocks once 4 KiB are unread, as on a socket; transfers striped over 3 channels from 1 KiB).
InprocOptions transport(bool bounded) {
  InprocOptions o;
  o.timeout = std::chrono::seconds(10);
  if (bounded) {
    o.stream_bytes = kInprocBoundedBytes;
    o.channels = 3;
    o.min_stripe = 1024;
  }
  return o;
}

// With `shm`, the ranks of one node (cs.local of them) talk over ShmComm's rings (4093 bytes:
// odd, and smaller than most messages, so they wrap and block), the rest over `opts`.
template <class T>
void run_case(const Case& cs, const InprocOptions& opts, bool shm = false) {
  const int n = cs.n;
  auto comms = make_inproc_comms(n, opts);
  testing_util::TempDir seg_dir;
  std::vector<int> node_of(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) node_of[static_cast<size_t>(r)] = r / cs.local;
  const size_t sn = send_elems(cs.coll, cs.count, n), rn = recv_elems(cs.coll, cs.count, n);
  // Out of place: separate send and recv buffers. In place, nccl-tests' layouts (types.h):
  // one buffer; AllGather's input is this rank's block of the output, ReduceScatter's output
  // this rank's block of the input.
  std::vector<std::vector<T>> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  std::vector<const T*> send_at(static_cast<size_t>(n));
  std::vector<T*> recv_at(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const size_t ri = static_cast<size_t>(r);
    auto& s = send[ri];
    auto& o = recv[ri];
    s.resize(sn);
    for (size_t i = 0; i < sn; ++i) s[i] = static_cast<T>(value(r, i));
    if (!cs.in_place) {
      o.assign(rn, static_cast<T>(-99));
      send_at[ri] = s.data();
      recv_at[ri] = o.data();
    } else if (cs.coll == Coll::kAllGather) {
      o.assign(rn, static_cast<T>(-99));
      std::copy(s.begin(), s.end(), o.begin() + static_cast<ptrdiff_t>(ri * cs.count));
      send_at[ri] = o.data() + ri * cs.count;
      recv_at[ri] = o.data();
    } else if (cs.coll == Coll::kReduceScatter) {
      o = s;
      send_at[ri] = o.data();
      recv_at[ri] = o.data() + ri * cs.count;
    } else {
      o = s;
      send_at[ri] = o.data();
      recv_at[ri] = o.data();
    }
  }
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) {
    th.emplace_back([&, r] {
      const size_t ri = static_cast<size_t>(r);
      Comm* cp = comms[ri].get();
      std::unique_ptr<ShmComm> sc;
      if (shm) {
        ShmOptions so;
        so.rank = r;
        so.size = n;
        for (int j = 0; j < n; ++j)
          so.shm.push_back(j != r && node_of[static_cast<size_t>(j)] == node_of[ri] ? 1 : 0);
        so.prefix = seg_dir.path() + "/seg.";
        so.board_path = seg_dir.path() + "/progress";
        so.timeout = opts.timeout;
        so.ring_bytes = 4093;
        auto made = ShmComm::connect(so, std::move(comms[ri]));
        if (!made) {
          st[ri] = std::unexpected(made.error());
          return;
        }
        sc = std::move(*made);
        cp = sc.get();
      }
      auto& c = *cp;
      c.set_node_of(node_of);
      Call k{cs.coll,
             cs.algo,
             cs.type,
             cs.op,
             cs.root,
             send_at[static_cast<size_t>(r)],
             recv_at[static_cast<size_t>(r)],
             cs.count};
      st[static_cast<size_t>(r)] = run(c, k);
    });
  }
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r)
    ASSERT_TRUE(st[static_cast<size_t>(r)])
        << name(cs.coll) << " " << name(cs.algo) << " n=" << n << " count=" << cs.count
        << " in_place=" << cs.in_place << ": " << st[static_cast<size_t>(r)].error().message;

  auto reduced = [&](size_t i) {  // reduction over ranks of element i of the send buffers
    T acc = static_cast<T>(value(0, i));
    for (int r = 1; r < n; ++r) acc = combine(cs.op, acc, static_cast<T>(value(r, i)));
    return acc;
  };
  size_t wrong = 0;
  for (int r = 0; r < n; ++r) {
    const T* out = recv_at[static_cast<size_t>(r)];
    for (size_t i = 0; i < rn; ++i) {
      T want{};
      switch (cs.coll) {
        case Coll::kAllReduce:
          want = reduced(i);
          break;
        case Coll::kReduce:  // a non-root's recv buffer is left as it was
          want = r == cs.root ? reduced(i) : static_cast<T>(cs.in_place ? value(r, i) : -99);
          break;
        case Coll::kBroadcast:
          want = static_cast<T>(value(cs.root, i));
          break;
        case Coll::kAllGather:
          want = static_cast<T>(value(static_cast<int>(i / cs.count), i % cs.count));
          break;
        case Coll::kReduceScatter:
          want = reduced(static_cast<size_t>(r) * cs.count + i);
          break;
        case Coll::kAllToAll:
          want = static_cast<T>(value(static_cast<int>(i / cs.count),
                                      static_cast<size_t>(r) * cs.count + i % cs.count));
          break;
        case Coll::kSendRecv:
          want = static_cast<T>(value((r - 1 + n) % n, i));
          break;
      }
      if (out[i] != want) ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0u) << name(cs.coll) << " " << name(cs.algo) << " n=" << n
                       << " count=" << cs.count << " local=" << cs.local << " root=" << cs.root
                       << " in_place=" << cs.in_place;
}

void run_any(const Case& c, bool bounded = false, bool shm = false) {
  const auto o = transport(bounded);
  switch (c.type) {
    case DataType::kFloat32:
      return run_case<float>(c, o, shm);
    case DataType::kInt32:
      return run_case<int32_t>(c, o, shm);
    case DataType::kFloat64:
      return run_case<double>(c, o, shm);
    case DataType::kInt64:
      return run_case<int64_t>(c, o, shm);
  }
}

TEST(Collective, EveryCollectiveAlgorithmRankCountAndOddSize) {
  const Coll colls[] = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast,
                        Coll::kReduce,    Coll::kAllToAll,  Coll::kSendRecv};
  int cases = 0;
  for (Coll coll : colls)
    for (Algo algo : native_algos(coll))
      for (int n = 1; n <= 9; ++n)
        for (size_t count : {size_t{1}, size_t{7}, size_t{1001}, size_t{70001}}) {
          // hier: every way of cutting n into equal nodes; others: one layout.
          // Others: one rank per node, and 2-3 ranks per node (the snake ring order).
          std::vector<int> locals{1, n % 3 == 0 ? 3 : 2};
          if (algo == Algo::kHier) {
            locals.clear();
            for (int l = 1; l <= n; ++l)
              if (n % l == 0) locals.push_back(l);
          }
          for (int local : locals) {
            const int root = rooted(coll) ? (n > 2 ? n - 2 : 0) : 0;
            const DataType type =
                (n + static_cast<int>(count)) % 2 ? DataType::kFloat32 : DataType::kInt32;
            const RedOp op = static_cast<RedOp>((n + local) % 3);  // sum, min, max
            run_any({coll, algo, type, op, n, count, root, local, false});
            ++cases;
          }
        }
  EXPECT_GT(cases, 400);
}

TEST(Collective, BothTypesAndEveryOpOnEveryAllReduceAlgorithm) {
  for (Algo algo : native_algos(Coll::kAllReduce))
    for (DataType t : {DataType::kFloat32, DataType::kInt32})
      for (RedOp op : {RedOp::kSum, RedOp::kMin, RedOp::kMax})
        for (int n : {3, 6})
          run_any({Coll::kAllReduce, algo, t, op, n, 4099, 0, n == 6 ? 2 : 3, false});
}

TEST(Collective, InPlace) {
  for (Coll coll : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast,
                    Coll::kReduce, Coll::kAllToAll, Coll::kSendRecv})
    for (Algo algo : native_algos(coll))
      run_any({coll, algo, DataType::kInt32, RedOp::kSum, 4, 513, 1, 2, true});
}

// The grid on the bounded transport: every collective x algorithm x 1..9 ranks x odd sizes
// (1, 7, 1023, 4099 elements; 70001, over tree's 256 KiB chunk, at 2 and 5 ranks) x in place
// and out of place. Capped to stay about a second: one node layout per case except hier
// (every equal split), and type and op rotate over the cases instead of multiplying them
// (every type and op still meets every collective; BothTypes... covers all ops per algorithm).
TEST(Collective, BoundedTransportEveryCollectiveAlgorithmRankCountSizeAndPlace) {
  const Coll colls[] = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast,
                        Coll::kReduce,    Coll::kAllToAll,  Coll::kSendRecv};
  const DataType types[] = {DataType::kFloat32, DataType::kInt32, DataType::kFloat64,
                            DataType::kInt64};
  int cases = 0;
  for (Coll coll : colls)
    for (Algo algo : native_algos(coll))
      for (int n = 1; n <= 9; ++n) {
        std::vector<size_t> counts{1, 7, 1023, 4099};
        if (n == 2 || n == 5) counts.push_back(70001);
        for (size_t count : counts)
          for (bool in_place : {false, true}) {
            std::vector<int> locals{cases % 2 ? 1 : (n % 3 == 0 ? 3 : 2)};
            if (algo == Algo::kHier) {
              locals.clear();
              for (int l = 1; l <= n; ++l)
                if (n % l == 0) locals.push_back(l);
            }
            for (int local : locals) {
              const int root = rooted(coll) ? (cases % n) : 0;
              const DataType type = types[static_cast<size_t>(cases) % 4];
              const RedOp op = static_cast<RedOp>((cases / 4) % 3);  // sum, min, max
              run_any({coll, algo, type, op, n, count, root, local, in_place}, true);
              ++cases;
              if (HasFatalFailure()) return;
            }
          }
      }
  EXPECT_GT(cases, 900);
}

// The same over the shared-memory transport for the ranks of one node (2 or 3 per node, all of
// them, or none) and the bounded in-process one between nodes: mixed exchanges, rings that wrap
// and fill, and every algorithm's hops over both.
TEST(Collective, SharedMemoryWithinNodesEveryCollectiveAlgorithmRankCountSizeAndPlace) {
  const Coll colls[] = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast,
                        Coll::kReduce,    Coll::kAllToAll,  Coll::kSendRecv};
  const DataType types[] = {DataType::kFloat32, DataType::kInt32, DataType::kFloat64,
                            DataType::kInt64};
  int cases = 0;
  for (Coll coll : colls)
    for (Algo algo : native_algos(coll))
      for (int n = 1; n <= 9; ++n) {
        std::vector<size_t> counts{1, 7, 1023, 4099};
        if (n == 2 || n == 5) counts.push_back(70001);  // many times the ring
        for (size_t count : counts)
          for (bool in_place : {false, true}) {
            const int choices[] = {2, 3, n, 1};
            int local = choices[static_cast<size_t>(cases) % 4];
            if (algo == Algo::kHier && n % local != 0) local = n;
            const int root = rooted(coll) ? (cases % n) : 0;
            const DataType type = types[static_cast<size_t>(cases) % 4];
            const RedOp op = static_cast<RedOp>((cases / 4) % 3);  // sum, min, max
            run_any({coll, algo, type, op, n, count, root, local, in_place}, true, true);
            ++cases;
            if (HasFatalFailure()) return;
          }
      }
  EXPECT_GT(cases, 900);
}

// A send nobody reads holds the stream's room and then waits (and times out), as on a socket,
// instead of buffering the whole message.
TEST(Collective, BoundedTransportBlocksASenderUntilTheReceiverReads) {
  auto o = transport(true);
  o.timeout = std::chrono::milliseconds(300);
  auto comms = make_inproc_comms(2, o);
  std::vector<int> big(100000, 7);  // 400 KB, 100 x the stream's room
  // Rank 0 sends with nobody reading: it must wait, and time out, not buffer it all.
  auto st = comms[0]->exchange({Xfer::send(1, big.data(), big.size() * sizeof(int))});
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("bytes to rank 1"), std::string::npos) << st.error().message;
}

// Buffers of several slices (detail::kSliceBytes) so the sliced ring steps, the halving-doubling
// exchanges and the tree's overlapped reduce-up and broadcast-down run many pipeline steps, at
// rank counts that give trees of depth 1..3 and chains of up to 9, in and out of place, on the
// bounded transport (a schedule that needs buffering deadlocks there).
TEST(Collective, SlicedPipelinesOverManySlices) {
  const size_t per = detail::kSliceBytes / 4;
  for (Coll coll :
       {Coll::kAllReduce, Coll::kReduce, Coll::kBroadcast, Coll::kReduceScatter, Coll::kAllGather})
    for (Algo algo : native_algos(coll))
      for (int n : {2, 5, 9}) {
        if (algo == Algo::kHier && n == 5) continue;  // no equal split but 1 or 5 a node
        const bool big =
            coll == Coll::kAllReduce || coll == Coll::kReduce || coll == Coll::kBroadcast;
        const size_t count = big ? 4 * per + 3 : per + 5;  // per rank block: many slices
        for (bool in_place : {false, true}) {
          if (in_place && !big) continue;
          run_any({coll, algo, DataType::kInt32, RedOp::kSum, n, count, n - 1, n == 9 ? 3 : 1,
                   in_place},
                  true);
        }
      }
}

TEST(Collective, RefusesWhatItDoesNotHave) {
  auto comms = make_inproc_comms(3);
  Call k{Coll::kAllGather, Algo::kTree, DataType::kFloat32, RedOp::kSum, 0, nullptr, nullptr, 1};
  auto st = check(*comms[0], k);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("native has: ring"), std::string::npos) << st.error().message;
  k = {Coll::kBroadcast, Algo::kRing, DataType::kFloat32, RedOp::kSum, 3, nullptr, nullptr, 1};
  EXPECT_FALSE(check(*comms[0], k));
  comms[0]->set_node_of({0, 0, 1});
  k = {Coll::kAllReduce, Algo::kHier, DataType::kFloat32, RedOp::kSum, 0, nullptr, nullptr, 1};
  st = check(*comms[0], k);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("same number of ranks"), std::string::npos);
}

TEST(Collective, FirstErrorReachesEveryWaiter) {
  // Rank 2 never joins; rank 0 fails on its own (as a watchdog would) and every other rank
  // must fail with that error long before its own 10 s timeout.
  auto comms = make_inproc_comms(3, std::chrono::seconds(10));
  std::vector<float> buf0(1000, 1), buf1(1000, 1);
  Status s1;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread t1([&] {
    Call k{Coll::kAllReduce, Algo::kRing, DataType::kFloat32, RedOp::kSum, 0, buf1.data(),
           buf1.data(),      1000};
    s1 = run(*comms[1], k);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  comms[0]->fail_with(Error{"rank 0 was killed", 0, 1});
  t1.join();
  ASSERT_FALSE(s1);
  EXPECT_NE(s1.error().message.find("rank 0 was killed"), std::string::npos) << s1.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  Call k{Coll::kAllReduce, Algo::kRing, DataType::kFloat32, RedOp::kSum, 0, buf0.data(),
         buf0.data(),      1000};
  EXPECT_FALSE(run(*comms[0], k));  // sticky
}

TEST(Collective, TimesOutWhenAPeerNeverComes) {
  auto comms = make_inproc_comms(2, std::chrono::milliseconds(200));
  std::vector<float> buf(10, 1);
  Call k{Coll::kAllReduce, Algo::kRing, DataType::kFloat32, RedOp::kSum, 0, buf.data(),
         buf.data(),       10};
  auto st = run(*comms[0], k);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("timed out after 200 ms"), std::string::npos)
      << st.error().message;
}

}  // namespace
}  // namespace tb::collective

namespace tb::collective::detail {
namespace {

TEST(Collective, RingOrderSnakesAcrossNodesSoEveryHopBetweenNodesStaysOnOneRail) {
  auto comms = make_inproc_comms(6);
  comms[0]->set_node_of({0, 0, 0, 1, 1, 1});
  EXPECT_EQ(ring_order(*comms[0]), (std::vector<int>{0, 1, 2, 5, 4, 3}));
  comms[0]->set_node_of({0, 0, 1, 1, 2, 2});
  EXPECT_EQ(ring_order(*comms[0]), (std::vector<int>{0, 1, 3, 2, 4, 5}));
  comms[0]->set_node_of({0, 0, 0, 0, 0, 0});
  EXPECT_EQ(ring_order(*comms[0]), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

}  // namespace
}  // namespace tb::collective::detail

namespace tb::collective {
namespace {

// The in-process transport's timeout is on the collective too: halving-doubling on 3 ranks,
// rank 2 behind a slow link (4 KiB pieces, 15 ms apart: about 0.5 s with bytes flowing all
// along) on the bounded transport; rank 0, folded, waits more than twice the 200 ms timeout.
std::vector<Status> hd_over_a_slow_link(int stall_after) {
  auto o = transport(true);
  o.timeout = std::chrono::milliseconds(200);
  o.channels = 1;  // SlowComm cuts transfers into pieces: stripes would not line up
  auto comms = make_inproc_comms(3, o);
  const size_t count = 32 * 1024;  // 128 KiB of float: 64 KiB per step between ranks 1 and 2
  std::vector<Status> st(3);
  std::vector<std::thread> th;
  for (int r = 0; r < 3; ++r)
    th.emplace_back([&, r] {
      std::vector<float> buf(count, static_cast<float>(r + 1));
      testing_util::SlowComm slow(*comms[static_cast<size_t>(r)], 4096,
                                  std::chrono::milliseconds(15), stall_after,
                                  std::chrono::milliseconds(800));
      Comm& comm = r == 2 ? static_cast<Comm&>(slow) : *comms[static_cast<size_t>(r)];
      auto s = run(comm, Call{Coll::kAllReduce, Algo::kHalvingDoubling, DataType::kFloat32,
                              RedOp::kSum, 0, buf.data(), buf.data(), count});
      if (s && std::count(buf.begin(), buf.end(), 6.0f) != static_cast<ptrdiff_t>(count))
        s = fail("rank " + std::to_string(r) + ": wrong result");
      st[static_cast<size_t>(r)] = s;
    });
  for (auto& t : th) t.join();
  return st;
}

TEST(Collective, AFoldedRankWaitsOutASlowLinkWhileTheCollectiveProgresses) {
  auto st = hd_over_a_slow_link(-1);
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(st[static_cast<size_t>(r)])
        << "rank " << r << ": " << st[static_cast<size_t>(r)].error().message;
}

TEST(Collective, ARealStallStillTimesOut) {
  auto st = hd_over_a_slow_link(4);  // rank 2 stops for 0.8 s (4 timeouts) after 4 pieces
  for (int r = 0; r < 3; ++r) {
    ASSERT_FALSE(st[static_cast<size_t>(r)]) << "rank " << r;
    EXPECT_NE(st[static_cast<size_t>(r)].error().message.find("timed out after 200 ms"),
              std::string::npos)
        << st[static_cast<size_t>(r)].error().message;
  }
}

}  // namespace
}  // namespace tb::collective
