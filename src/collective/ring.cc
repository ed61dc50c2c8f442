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

Status ring_reduce_scatter(Comm& c, const std::vector<int>& members, int me, std::byte* buf,
                           const Blocks& blocks, DataType t, RedOp op) {
  const int n = static_cast<int>(members.size());
  if (n == 1) return {};
  const size_t es = type_size(t);
  size_t max_block = 0;
  for (const auto& [o, len] : blocks) max_block = std::max(max_block, len);
  std::vector<std::byte> tmp(max_block * es);
  const int next = members[mod(me + 1, n)], prev = members[mod(me - 1, n)];
  for (int s = 0; s < n - 1; ++s) {
    const auto& sb = blocks[mod(me - s - 1, n)];
    const auto& rb = blocks[mod(me - s - 2, n)];
    TB_TRY(c.exchange({Xfer::send(next, buf + sb.first * es, sb.second * es),
                       Xfer::recv(prev, tmp.data(), rb.second * es)}));
    reduce_into(buf + rb.first * es, tmp.data(), rb.second, t, op);
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
    TB_TRY(c.exchange({Xfer::send(next, buf + sb.first * es, sb.second * es),
                       Xfer::recv(prev, buf + rb.first * es, rb.second * es)}));
  }
  return {};
}

}  // namespace tb::collective::detail
