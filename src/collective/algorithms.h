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

// A ring over `members` (ranks, in ring order; this rank at position `me`) working on `buf`,
// where position i's block is blocks[i].
// reduce_scatter: afterwards block `me` holds the reduction over members.
Status ring_reduce_scatter(Comm& c, const std::vector<int>& members, int me, std::byte* buf,
                           const Blocks& blocks, DataType t, RedOp op);
// all_gather: block `me` is given; afterwards every block holds its owner's block.
Status ring_all_gather(Comm& c, const std::vector<int>& members, int me, std::byte* buf,
                       const Blocks& blocks, size_t es);

// Pipelined trees (a chain is a tree with one child): `buf` of count elements, in chunks.
// up: children's data is reduced into buf and passed to the parent (parent < 0: the root).
// down: the parent's data is received into buf and passed to the children.
Status pipeline_up(Comm& c, int parent, const std::vector<int>& children, std::byte* buf,
                   size_t count, DataType t, RedOp op);
Status pipeline_down(Comm& c, int parent, const std::vector<int>& children, std::byte* buf,
                     size_t count, size_t es);

// Binary tree (heap order) over ranks with `root` at the top / a chain root -> root+1 -> ...
void tree_links(int rank, int size, int root, int* parent, std::vector<int>* children);
void chain_links(int rank, int size, int root, int* parent, std::vector<int>* children);

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
