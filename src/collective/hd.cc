// Halving-doubling AllReduce (Rabenseifner; Thakur, Rabenseifner, Gropp 2005): recursive
// halving reduce-scatter then recursive doubling all-gather among a power of two of ranks.
// With n not a power of two, the first 2*(n - p) ranks fold pairwise first (the even one
// hands its data to the odd one and sits out) and get the result back at the end. Every
// transfer moves in slices, each reduced as it lands (no per-call buffer).
#include <utility>

#include "collective/algorithms.h"

namespace tb::collective::detail {

Status allreduce_hd(Comm& c, std::byte* buf, size_t count, DataType t, RedOp op) {
  const int n = c.size(), r = c.rank();
  const size_t es = type_size(t);
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;

  // Fold: ranks below 2*rem pair up; odd ones carry on with newrank r/2.
  int nr;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      TB_TRY(exchange_sliced(c, r + 1, buf, count * es, -1, nullptr, 0));
      nr = -1;
    } else {
      TB_TRY(exchange_reduce(c, -1, nullptr, 0, r - 1, buf, buf, count, t, op));
      nr = r / 2;
    }
  } else {
    nr = r - rem;
  }
  auto real = [rem](int newrank) { return newrank < rem ? newrank * 2 + 1 : newrank + rem; };

  if (nr >= 0) {
    // Recursive halving: keep half of the current range, send the other half to the partner.
    std::vector<std::pair<size_t, size_t>> ranges;  // the range before each step
    size_t lo = 0, hi = count;
    for (int d = p / 2; d >= 1; d /= 2) {
      const int partner = nr ^ d;
      const size_t mid = lo + (hi - lo) / 2;
      ranges.emplace_back(lo, hi);
      const bool lower = nr < partner;
      const size_t klo = lower ? lo : mid, khi = lower ? mid : hi;  // kept
      const size_t slo = lower ? mid : lo, shi = lower ? hi : mid;  // sent
      TB_TRY(exchange_reduce(c, real(partner), buf + slo * es, shi - slo, real(partner),
                             buf + klo * es, buf + klo * es, khi - klo, t, op));
      lo = klo;
      hi = khi;
    }
    // Recursive doubling: give the partner my range, take theirs; undo the halving in reverse.
    for (int d = 1, i = static_cast<int>(ranges.size()) - 1; d < p; d *= 2, --i) {
      const int partner = nr ^ d;
      const auto [plo, phi] = ranges[static_cast<size_t>(i)];
      const size_t olo = lo == plo ? hi : plo, ohi = lo == plo ? phi : lo;  // partner's half
      TB_TRY(exchange_sliced(c, real(partner), buf + lo * es, (hi - lo) * es, real(partner),
                             buf + olo * es, (ohi - olo) * es));
      lo = plo;
      hi = phi;
    }
  }

  // Unfold: odd ranks of the folded pairs return the result.
  if (r < 2 * rem) {
    if (r % 2 == 1)
      TB_TRY(exchange_sliced(c, r - 1, buf, count * es, -1, nullptr, 0));
    else
      TB_TRY(exchange_sliced(c, -1, nullptr, 0, r + 1, buf, count * es));
  }
  return {};
}

}  // namespace tb::collective::detail
