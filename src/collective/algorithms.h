// The algorithm building blocks collective.cc composes. Internal to the room.
// Buffers are raw bytes; `es` is the element size; counts are in elements.
#pragma once

#include <cstddef>
#include <vector>

#include "collective/comm.h"
#include "collective/types.h"

namespace tb::collective::detail {

// Offsets of `parts` near-equal blocks of `count` elements: off[i]..off[i+1], off.size()=parts+1.
std::vector<size_t> split(size_t count, int parts);

// Blocks of a buffer, one per ring position: element offset and count.
using Blocks = std::vector<std::pair<size_t, size_t>>;
Blocks blocks_of(const std::vector<size_t>& off);  // from split()'s offsets

// The ring order NCCL uses on rail-optimized clusters: ranks grouped by node, every other
// node's ranks reversed (a snake), so each hop between nodes joins two GPUs with the same
// local index — the same rail, one ToR, no spine and no ECMP hash to polarize.
std::vector<int> ring_order(const Comm& c);

// Transfers move in slices of Comm::slice_bytes(): each received slice is reduced as it lands
// and forwarded by the next exchange, so a step never waits for a whole block and the receive
// buffer stays in cache. Trees and chains move chunks of kSliceBytes.
inline constexpr size_t kSliceBytes = 256 * 1024;

// Comm::scratch slots the algorithms use (one collective at a time per communicator).
enum ScratchSlot : int {
  kSlotRecv = 0,   // received slices (ring, hd) / the first child's chunks (tree)
  kSlotRecv2 = 1,  // the second child's chunks (tree)
  kSlotWork = 2,   // reduced chunks a non-root Reduce forwards (two, alternating)
  kSlotWhole = 3,  // ReduceScatter's work buffer
};

// out[i] = a[i] op b[i] for n elements (out may be a).
void reduce_to(void* out, const void* a, const void* b, size_t n, DataType t, RedOp op);

// Sends send_n elements at `send` to `to` while receiving recv_n elements from `from`, slice by
// slice; each received slice is reduced as it lands: out[i] = in[i] op received[i] (out may be
// in). `to` or `from` < 0: that direction is idle.
Status exchange_reduce(Comm& c, int to, const std::byte* send, size_t send_n, int from,
                       const std::byte* in, std::byte* out, size_t recv_n, DataType t, RedOp op);
// The same without a reduction: the received bytes land at `recv`.
Status exchange_sliced(Comm& c, int to, const std::byte* send, size_t send_bytes, int from,
                       std::byte* recv, size_t recv_bytes);

// A ring over `members` (ranks, in ring order; this rank at position `me`), where position i's
// block is blocks[i] (element offsets into the buffers), pipelined by slices.
// reduce_scatter: reads `in`, writes `out` (the same layout; may be `in`); afterwards out's
// block `me` holds the reduction over members (every other block of `out` but me-1's is left
// with partial sums).
Status ring_reduce_scatter(Comm& c, const std::vector<int>& members, int me, const std::byte* in,
                           std::byte* out, const Blocks& blocks, DataType t, RedOp op);
// all_gather: block `me` is given; afterwards every block holds its owner's block.
Status ring_all_gather(Comm& c, const std::vector<int>& members, int me, std::byte* buf,
                       const Blocks& blocks, size_t es);

// Pipelined trees (a chain is a tree with one child), in chunks of kSliceBytes.
struct TreePos {
  int parent = -1;  // < 0: the root
  std::vector<int> children;
  int depth = 0;   // edges from the root
  int height = 0;  // the deepest node's depth: every node works on a shared step clock
};
// Binary tree (heap order) / chain over the positions of `order` (ranks; empty = rank order),
// rooted at rank `root`.
TreePos tree_pos(int rank, int size, int root, const std::vector<int>& order);
TreePos chain_pos(int rank, int size, int root, const std::vector<int>& order);

// up: `in` and the children's data reduced, passed to the parent; at the root (or wherever out
// is given) the reductions land in `out`; a non-root with out == nullptr keeps nothing.
Status pipeline_up(Comm& c, const TreePos& p, const std::byte* in, std::byte* out, size_t count,
                   DataType t, RedOp op);
// down: the parent's data is received into buf and passed to the children.
Status pipeline_down(Comm& c, const TreePos& p, std::byte* buf, size_t count, size_t es);
// AllReduce as NCCL's tree does it: reduce up and broadcast down at once (a chunk goes down
// while later chunks still come up, over the opposite direction of each link); `out` may be `in`.
Status tree_allreduce(Comm& c, const TreePos& p, const std::byte* in, std::byte* out, size_t count,
                      DataType t, RedOp op);

Status allreduce_hd(Comm& c, std::byte* buf, size_t count, DataType t, RedOp op);
Status allreduce_hier(Comm& c, std::byte* buf, size_t count, DataType t, RedOp op);
// Ranks grouped by node for hier, or an error saying why the layout does not fit.
struct HierLayout {
  std::vector<int> local;  // ranks on this rank's node, in rank order
  std::vector<int> rail;   // ranks with this rank's local index, one per node, in node order
  int local_index = 0, node_index = 0;
};
Result<HierLayout> hier_layout(const Comm& c);

}  // namespace tb::collective::detail
