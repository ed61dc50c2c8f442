// Hierarchical AllReduce, the shape NCCL uses on rail-optimized clusters: reduce-scatter
// inside each node (NVLink), all-reduce of each local shard across nodes among the ranks with
// the same local index (one rail each), then all-gather inside the node. Cross-node traffic
// per rank is 1/L of the flat ring's, on L rails at once.
#include <algorithm>
#include <map>

#include "collective/algorithms.h"

namespace tb::collective::detail {

Result<HierLayout> hier_layout(const Comm& c) {
  std::map<int, std::vector<int>> by_node;  // node id -> ranks, in rank order
  for (int r = 0; r < c.size(); ++r) by_node[c.node_of()[static_cast<size_t>(r)]].push_back(r);
  const size_t per = by_node.begin()->second.size();
  for (const auto& [node, ranks] : by_node)
    if (ranks.size() != per)
      return bad_input("hier needs the same number of ranks on every server: server " +
                       std::to_string(by_node.begin()->first) + " has " + std::to_string(per) +
                       ", server " + std::to_string(node) + " has " + std::to_string(ranks.size()) +
                       " (select whole servers with --ranks)");
  HierLayout l;
  const int me = c.rank();
  int ni = 0;
  for (const auto& [node, ranks] : by_node) {
    const auto it = std::find(ranks.begin(), ranks.end(), me);
    if (it != ranks.end()) {
      l.local = ranks;
      l.local_index = static_cast<int>(it - ranks.begin());
      l.node_index = ni;
    }
    ++ni;
  }
  for (const auto& [node, ranks] : by_node)
    l.rail.push_back(ranks[static_cast<size_t>(l.local_index)]);
  return l;
}

Status allreduce_hier(Comm& c, std::byte* buf, size_t count, DataType t, RedOp op) {
  auto l = hier_layout(c);
  if (!l) return std::unexpected(l.error());
  const size_t es = type_size(t);
  const int local_n = static_cast<int>(l->local.size());
  const auto off = split(count, local_n);
  TB_TRY(ring_reduce_scatter(c, l->local, l->local_index, buf, buf, blocks_of(off), t, op));
  // My shard, all-reduced across nodes by a ring over my rail.
  std::byte* shard = buf + off[static_cast<size_t>(l->local_index)] * es;
  const size_t shard_n =
      off[static_cast<size_t>(l->local_index) + 1] - off[static_cast<size_t>(l->local_index)];
  const auto roff = split(shard_n, static_cast<int>(l->rail.size()));
  TB_TRY(ring_reduce_scatter(c, l->rail, l->node_index, shard, shard, blocks_of(roff), t, op));
  TB_TRY(ring_all_gather(c, l->rail, l->node_index, shard, blocks_of(roff), es));
  return ring_all_gather(c, l->local, l->local_index, buf, blocks_of(off), es);
}

}  // namespace tb::collective::detail
