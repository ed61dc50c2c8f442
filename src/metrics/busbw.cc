#include "metrics/busbw.h"

#include <algorithm>

namespace tb::metrics {

using collective::Coll;

double bus_factor(Coll c, int n) {
  const double dn = n;
  switch (c) {
    case Coll::kAllReduce:
      return 2.0 * (dn - 1) / dn;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAllToAll:
      return (dn - 1) / dn;
    default:
      return 1.0;
  }
}

uint64_t size_bytes(Coll c, uint64_t count, int n, collective::DataType t) {
  const uint64_t es = collective::type_size(t);
  const uint64_t total =
      std::max(collective::send_elems(c, count, n), collective::recv_elems(c, count, n));
  return total * es;
}

uint64_t count_for(Coll c, uint64_t bytes, int n, collective::DataType t) {
  const uint64_t es = collective::type_size(t);
  const uint64_t per =
      std::max<uint64_t>(1, static_cast<uint64_t>(std::max(collective::send_elems(c, 1, n),
                                                           collective::recv_elems(c, 1, n))));
  return std::max<uint64_t>(1, bytes / (es * per));
}

Bandwidth bandwidth(Coll c, uint64_t size, double time_us, int n) {
  if (time_us <= 0) return {};
  const double alg = static_cast<double>(size) / (time_us * 1e-6) / 1e9;
  return {alg, alg * bus_factor(c, n)};
}

}  // namespace tb::metrics
