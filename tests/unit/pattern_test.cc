// The bench's check pattern (workload/pattern.h): exact for every type and op, and strict: an
// output shifted by any delta in 1..256 elements (a slip in a ring or a stripe) is flagged on at
// least 90% of the shifted elements, for every collective, type and op the bench checks.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "workload/pattern.h"

namespace tb::workload {
namespace {

using collective::Call;
using collective::Coll;
using collective::DataType;
using collective::RedOp;

const Coll kColls[] = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast,
                       Coll::kReduce,    Coll::kAllToAll,  Coll::kSendRecv};
const DataType kTypes[] = {DataType::kFloat32, DataType::kInt32, DataType::kFloat64,
                           DataType::kInt64};

// The reduction over n ranks' inputs, computed the slow way (as the collective would).
template <class T>
std::vector<T> reduce_inputs(const Call& k, int n, uint64_t seed) {
  const size_t sn = collective::send_elems(k.coll, k.count, n);
  std::vector<T> acc(sn), in(sn);
  for (int r = 0; r < n; ++r) {
    Call c = k;
    c.send = in.data();
    fill_input(c, r, n, seed);
    if (r == 0)
      acc = in;
    else
      collective::reduce_into(acc.data(), in.data(), sn, k.type, k.op);
  }
  return acc;
}

template <class T>
void expect_closed_form_matches_reduction(Coll coll, RedOp op, int n) {
  Call k{coll, collective::Algo::kRing, DataType::kInt32, op, 0, nullptr, nullptr, 777};
  if constexpr (std::is_same_v<T, float>) k.type = DataType::kFloat32;
  if constexpr (std::is_same_v<T, double>) k.type = DataType::kFloat64;
  if constexpr (std::is_same_v<T, int64_t>) k.type = DataType::kInt64;
  const auto sum = reduce_inputs<T>(k, n, 42);
  for (int r = 0; r < n; r += std::max(1, n / 3)) {
    std::vector<T> out(collective::recv_elems(coll, k.count, n));
    k.recv = out.data();
    const size_t lo = coll == Coll::kReduceScatter ? static_cast<size_t>(r) * k.count : 0;
    std::memcpy(out.data(), sum.data() + lo, out.size() * sizeof(T));
    EXPECT_EQ(count_wrong(k, r, n, 42), 0u)
        << collective::name(coll) << " " << collective::name(op) << " n=" << n << " rank " << r;
  }
}

TEST(Pattern, ReductionsAreExactUpTo4096RanksInEveryType) {
  for (RedOp op : {RedOp::kSum, RedOp::kMin, RedOp::kMax}) {
    for (int n : {1, 2, 3, 9, 64}) {
      expect_closed_form_matches_reduction<float>(Coll::kAllReduce, op, n);
      expect_closed_form_matches_reduction<int32_t>(Coll::kAllReduce, op, n);
      expect_closed_form_matches_reduction<double>(Coll::kReduce, op, n);
      expect_closed_form_matches_reduction<int64_t>(Coll::kAllReduce, op, n);
    }
    // 4096 ranks: float, the type whose exactness the bound protects (the others are wider).
    expect_closed_form_matches_reduction<float>(Coll::kAllReduce, op, 4096);
    expect_closed_form_matches_reduction<float>(Coll::kReduceScatter, op, 5);
  }
}

// Float sums of 4096 ranks in the worst order (largest first, then the rest) stay exact: every
// input is an integer of magnitude <= 3000, so every partial sum is below 2^24.
TEST(Pattern, InputsAreSmallIntegers) {
  for (Coll coll : kColls)
    for (RedOp op : {RedOp::kSum, RedOp::kMin, RedOp::kMax}) {
      std::vector<int64_t> in(4096);
      Call k{coll, collective::Algo::kRing, DataType::kInt64, op, 0, in.data(), nullptr, 4096};
      if (coll == Coll::kReduceScatter || coll == Coll::kAllToAll) k.count = 1;
      for (int r : {0, 1, 4095}) {
        fill_input(k, r, 4096, 7);
        for (size_t i = 0; i < collective::send_elems(coll, k.count, 4096); ++i)
          ASSERT_LE(std::abs(in[i]), 3000) << collective::name(coll) << " " << i;
      }
    }
}

// An expected output slipped by delta elements: out[i] = expected[i - delta].
template <class T>
void expect_shift_flagged(const Call& base, int n, int rank) {
  Call k = base;
  const size_t rn = collective::recv_elems(k.coll, k.count, n);
  std::vector<T> want(rn), out(rn);
  k.recv = want.data();
  fill_expected(k, rank, n, 99);
  ASSERT_EQ(count_wrong(k, rank, n, 99), 0u);
  k.recv = out.data();
  for (size_t delta = 1; delta <= 256; ++delta) {
    for (size_t i = 0; i < rn; ++i) out[i] = i >= delta ? want[i - delta] : want[i];
    const uint64_t wrong = count_wrong(k, rank, n, 99);
    EXPECT_GE(wrong * 10, (rn - delta) * 9)
        << collective::name(k.coll) << " " << collective::name(k.type) << " "
        << collective::name(k.op) << " delta " << delta << ": " << wrong << " of " << rn - delta;
  }
}

TEST(Pattern, AnOutputShiftedByUpTo256ElementsIsFlaggedOnNinetyPercent) {
  const int n = 8, rank = 3;
  for (Coll coll : kColls)
    for (DataType t : kTypes)
      for (RedOp op : {RedOp::kSum, RedOp::kMin, RedOp::kMax}) {
        if (!collective::reduces(coll) && op != RedOp::kSum) continue;
        // 4096 elements of output; root = the checked rank, so Reduce's output is defined.
        const size_t count = collective::recv_elems(coll, 1, n) == 1 ? 4096 : 4096 / n;
        const Call k{coll, collective::Algo::kRing, t, op, rank, nullptr, nullptr, count};
        switch (t) {
          case DataType::kFloat32:
            expect_shift_flagged<float>(k, n, rank);
            break;
          case DataType::kInt32:
            expect_shift_flagged<int32_t>(k, n, rank);
            break;
          case DataType::kFloat64:
            expect_shift_flagged<double>(k, n, rank);
            break;
          case DataType::kInt64:
            expect_shift_flagged<int64_t>(k, n, rank);
            break;
        }
      }
}

// The old pattern's weakness, kept as a regression: inputs must not repeat at any short period.
TEST(Pattern, InputsHaveNoShortPeriod) {
  std::vector<float> in(8192);
  Call k{Coll::kAllGather,
         collective::Algo::kRing,
         DataType::kFloat32,
         RedOp::kSum,
         0,
         in.data(),
         nullptr,
         in.size()};
  fill_input(k, 2, 4, 5);
  for (size_t p = 1; p <= 1024; ++p) {
    size_t same = 0;
    for (size_t i = p; i < in.size(); ++i) same += in[i] == in[i - p];
    EXPECT_LT(same * 100, in.size() - p) << "period " << p << ": " << same << " equal";
  }
}

// A rank's data in the wrong place (another rank's block, or the input left as output) is seen.
TEST(Pattern, RanksAndInputsAreToldApart) {
  const int n = 4;
  std::vector<int32_t> a(1000), b(1000);
  Call k{Coll::kAllGather,
         collective::Algo::kRing,
         DataType::kInt32,
         RedOp::kSum,
         0,
         a.data(),
         nullptr,
         1000};
  fill_input(k, 1, n, 3);
  k.send = b.data();
  fill_input(k, 2, n, 3);
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  EXPECT_LT(same, 10u);
  // AllReduce in place that did nothing: the input is not the sum.
  Call ar{Coll::kAllReduce,
          collective::Algo::kRing,
          DataType::kInt32,
          RedOp::kSum,
          0,
          a.data(),
          a.data(),
          1000};
  fill_input(ar, 1, n, 3);
  EXPECT_GT(count_wrong(ar, 1, n, 3), 990u);
}

}  // namespace
}  // namespace tb::workload
