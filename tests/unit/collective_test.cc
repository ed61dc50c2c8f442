// Every native collective x algorithm x rank counts 1..9 x odd sizes, ranks as threads over
// the in-process transport, with integer-valued data so results are exact in any order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "collective/algorithms.h"
#include "collective/collective.h"
#include "collective/inproc/inproc.h"

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

template <class T>
void run_case(const Case& cs) {
  const int n = cs.n;
  auto comms = make_inproc_comms(n, std::chrono::seconds(10));
  std::vector<int> node_of(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) node_of[static_cast<size_t>(r)] = r / cs.local;
  const size_t sn = send_elems(cs.coll, cs.count, n), rn = recv_elems(cs.coll, cs.count, n);
  std::vector<std::vector<T>> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto& s = send[static_cast<size_t>(r)];
    s.resize(sn);
    for (size_t i = 0; i < sn; ++i) s[i] = static_cast<T>(value(r, i));
    recv[static_cast<size_t>(r)].assign(std::max(rn, cs.in_place ? sn : 0), static_cast<T>(-99));
    if (cs.in_place) recv[static_cast<size_t>(r)] = s;
  }
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) {
    th.emplace_back([&, r] {
      auto& c = *comms[static_cast<size_t>(r)];
      c.set_node_of(node_of);
      Call k{
          cs.coll,
          cs.algo,
          cs.type,
          cs.op,
          cs.root,
          cs.in_place ? recv[static_cast<size_t>(r)].data() : send[static_cast<size_t>(r)].data(),
          recv[static_cast<size_t>(r)].data(),
          cs.count};
      st[static_cast<size_t>(r)] = run(c, k);
    });
  }
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r)
    ASSERT_TRUE(st[static_cast<size_t>(r)]) << st[static_cast<size_t>(r)].error().message;

  auto reduced = [&](size_t i) {  // reduction over ranks of element i of the send buffers
    T acc = static_cast<T>(value(0, i));
    for (int r = 1; r < n; ++r) acc = combine(cs.op, acc, static_cast<T>(value(r, i)));
    return acc;
  };
  size_t wrong = 0;
  for (int r = 0; r < n; ++r) {
    const auto& out = recv[static_cast<size_t>(r)];
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

void run_any(const Case& c) {
  if (c.type == DataType::kFloat32)
    run_case<float>(c);
  else
    run_case<int32_t>(c);
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
  for (Coll coll : {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kSendRecv})
    for (Algo algo : native_algos(coll))
      run_any({coll, algo, DataType::kInt32, RedOp::kSum, 4, 513, 1, 2, true});
}

// Buffers of several slices (detail::kSliceBytes) so the sliced ring steps, the halving-doubling
// exchanges and the tree's overlapped reduce-up and broadcast-down run many pipeline steps, at
// rank counts that give trees of depth 1..3 and chains of up to 9, in and out of place.
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
                   in_place});
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
