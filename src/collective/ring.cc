// Ring reduce-scatter and all-gather over any member list: the bandwidth-optimal pair that
// ring AllReduce, ReduceScatter, AllGather and the hierarchical AllReduce are built from.
#include <algorithm>
#include <cstdint>
#include <span>

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

Blocks blocks_of(const std::vector<size_t>& off) {
  Blocks b;
  for (size_t i = 0; i + 1 < off.size(); ++i) b.emplace_back(off[i], off[i + 1] - off[i]);
  return b;
}

std::vector<int> ring_order(const Comm& c) {
  std::vector<int> nodes;  // node ids in order of their first rank
  for (int node : c.node_of())
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
  std::vector<int> order;
  for (size_t k = 0; k < nodes.size(); ++k) {
    std::vector<int> local;
    for (int r = 0; r < c.size(); ++r)
      if (c.node_of()[static_cast<size_t>(r)] == nodes[k]) local.push_back(r);
    if (k % 2 == 1) std::reverse(local.begin(), local.end());
    order.insert(order.end(), local.begin(), local.end());
  }
  return order;
}

namespace {

template <class T>
void reduce_typed_to(T* out, const T* a, const T* b, size_t n, RedOp op) {
  switch (op) {
    case RedOp::kSum:
      for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
      return;
    case RedOp::kMin:
      for (size_t i = 0; i < n; ++i) out[i] = std::min(a[i], b[i]);
      return;
    case RedOp::kMax:
      for (size_t i = 0; i < n; ++i) out[i] = std::max(a[i], b[i]);
      return;
    case RedOp::kProd:
      for (size_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
      return;
  }
}

size_t slices_of(size_t n, size_t per) {
  return (n + per - 1) / per;
}

}  // namespace

void reduce_to(void* out, const void* a, const void* b, size_t n, DataType t, RedOp op) {
  if (out == a) return reduce_into(out, b, n, t, op);
  switch (t) {
    case DataType::kFloat32:
      return reduce_typed_to(static_cast<float*>(out), static_cast<const float*>(a),
                             static_cast<const float*>(b), n, op);
    case DataType::kInt32:
      return reduce_typed_to(static_cast<int32_t*>(out), static_cast<const int32_t*>(a),
                             static_cast<const int32_t*>(b), n, op);
    case DataType::kFloat64:
      return reduce_typed_to(static_cast<double*>(out), static_cast<const double*>(a),
                             static_cast<const double*>(b), n, op);
    case DataType::kInt64:
      return reduce_typed_to(static_cast<int64_t*>(out), static_cast<const int64_t*>(a),
                             static_cast<const int64_t*>(b), n, op);
  }
}

Status exchange_reduce(Comm& c, int to, const std::byte* send, size_t send_n, int from,
                       const std::byte* in, std::byte* out, size_t recv_n, DataType t, RedOp op) {
  const size_t es = type_size(t), per = std::max<size_t>(1, c.slice_bytes() / es);
  if (to < 0) send_n = 0;
  if (from < 0) recv_n = 0;
  std::byte* tmp = recv_n ? c.scratch(kSlotRecv, std::min(recv_n, per) * es) : nullptr;
  const size_t slices = std::max(slices_of(send_n, per), slices_of(recv_n, per));
  for (size_t j = 0; j < slices; ++j) {
    const size_t lo = j * per;
    const size_t sn = lo < send_n ? std::min(per, send_n - lo) : 0;
    const size_t rn = lo < recv_n ? std::min(per, recv_n - lo) : 0;
    Xfer x[2];
    size_t k = 0;
    if (sn) x[k++] = Xfer::send(to, send + lo * es, sn * es);
    if (rn) x[k++] = Xfer::recv(from, tmp, rn * es);
    TB_TRY(c.exchange(std::span<const Xfer>(x, k)));
    if (rn) reduce_to(out + lo * es, in + lo * es, tmp, rn, t, op);
  }
  return {};
}

Status exchange_sliced(Comm& c, int to, const std::byte* send, size_t send_bytes, int from,
                       std::byte* recv, size_t recv_bytes) {
  if (to < 0) send_bytes = 0;
  if (from < 0) recv_bytes = 0;
  const size_t per = std::max<size_t>(1, c.slice_bytes());
  const size_t slices = std::max(slices_of(send_bytes, per), slices_of(recv_bytes, per));
  for (size_t j = 0; j < slices; ++j) {
    const size_t lo = j * per;
    const size_t sn = lo < send_bytes ? std::min(per, send_bytes - lo) : 0;
    const size_t rn = lo < recv_bytes ? std::min(per, recv_bytes - lo) : 0;
    Xfer x[2];
    size_t k = 0;
    if (sn) x[k++] = Xfer::send(to, send + lo, sn);
    if (rn) x[k++] = Xfer::recv(from, recv + lo, rn);
    TB_TRY(c.exchange(std::span<const Xfer>(x, k)));
  }
  return {};
}

// Step s sends block me-s-1 and receives block me-s-2, slice by slice: slice j of a block
// reduced in step s goes out in step s+1's exchange j, so every received slice is forwarded as
// soon as the slice before it has gone (NCCL's ring steps, at slice granularity).
Status ring_reduce_scatter(Comm& c, const std::vector<int>& members, int me, const std::byte* in,
                           std::byte* out, const Blocks& blocks, DataType t, RedOp op) {
  const int n = static_cast<int>(members.size());
  if (n == 1) return {};
  const size_t es = type_size(t);
  const int next = members[mod(me + 1, n)], prev = members[mod(me - 1, n)];
  for (int s = 0; s < n - 1; ++s) {
    const auto& sb = blocks[mod(me - s - 1, n)];
    const auto& rb = blocks[mod(me - s - 2, n)];
    const std::byte* src = s == 0 ? in : out;  // block me-1 was never reduced here
    TB_TRY(exchange_reduce(c, next, src + sb.first * es, sb.second, prev, in + rb.first * es,
                           out + rb.first * es, rb.second, t, op));
  }
  return {};
}

Status ring_all_gather(Comm& c, const std::vector<int>& members, int me, std::byte* buf,
                       const Blocks& blocks, size_t es) {
  const int n = static_cast<int>(members.size());
  const int next = members[mod(me + 1, n)], prev = members[mod(me - 1, n)];
  for (int s = 0; s < n - 1; ++s) {
    const auto& sb = blocks[mod(me - s, n)];
    const auto& rb = blocks[mod(me - s - 1, n)];
    TB_TRY(exchange_sliced(c, next, buf + sb.first * es, sb.second * es, prev, buf + rb.first * es,
                           rb.second * es));
  }
  return {};
}

}  // namespace tb::collective::detail
