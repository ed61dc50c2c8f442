// Ring reduce-scatter and all-gather over any member list: the bandwidth-optimal pair that
// ring AllReduce, ReduceScatter, AllGather and the hierarchical AllReduce are built from.
#include <algorithm>

#include "collective/algorithms.h"

namespace tb::collective::detail {
namespace {

int mod(int a, int n) {
  return ((a % n) + n) % n;
}

}  // namespace

std::vector<size_t> split(size_t count, int parts) {
  std::vector<size_t> off(static_cast<size_t>(parts) + 1);
  for (int i = 0; i <= parts; ++i)
    off[static_cast<size_t>(i)] = count * static_cast<size_t>(i) / static_cast<size_t>(parts);
  return off;
}

Status ring_reduce_scatter(Comm& c, const std::vector<int>& members, int me, std::byte* buf,
                           const std::vector<size_t>& off, DataType t, RedOp op) {
  const int n = static_cast<int>(members.size());
  if (n == 1) return {};
  const size_t es = type_size(t);
  size_t max_block = 0;
  for (int b = 0; b < n; ++b) max_block = std::max(max_block, off[b + 1] - off[b]);
  std::vector<std::byte> tmp(max_block * es);
  const int next = members[mod(me + 1, n)], prev = members[mod(me - 1, n)];
  for (int s = 0; s < n - 1; ++s) {
    const int sb = mod(me - s - 1, n), rb = mod(me - s - 2, n);
    const size_t rlen = off[rb + 1] - off[rb];
    TB_TRY(c.exchange({Xfer::send(next, buf + off[sb] * es, (off[sb + 1] - off[sb]) * es),
                       Xfer::recv(prev, tmp.data(), rlen * es)}));
    reduce_into(buf + off[rb] * es, tmp.data(), rlen, t, op);
  }
  return {};
}

Status ring_all_gather(Comm& c, const std::vector<int>& members, int me, std::byte* buf,
                       const std::vector<size_t>& off, size_t es) {
  const int n = static_cast<int>(members.size());
  const int next = members[mod(me + 1, n)], prev = members[mod(me - 1, n)];
  for (int s = 0; s < n - 1; ++s) {
    const int sb = mod(me - s, n), rb = mod(me - s - 1, n);
    TB_TRY(c.exchange({Xfer::send(next, buf + off[sb] * es, (off[sb + 1] - off[sb]) * es),
                       Xfer::recv(prev, buf + off[rb] * es, (off[rb + 1] - off[rb]) * es)}));
  }
  return {};
}

}  // namespace tb::collective::detail
