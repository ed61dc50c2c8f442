// Pipelined trees and chains: data moves in chunks so every level of the tree works at once
// (chunk k goes up or down while chunk k+1 arrives), as NCCL's tree and chain do.
//
// Every rank runs on one step clock shared by the whole tree: in step T a node of depth d
// (height H = the deepest node's depth, h = H - d) receives chunk T-h+1 from its children and
// sends chunk T-h to its parent (up), and receives chunk T-H-d+1 from its parent and sends chunk
// T-H-d to its children (down; the root sends chunk T-H). Both ends of every transfer issue it
// in the same step, so the steps cannot deadlock whatever the transport buffers, and a chunk
// received (and reduced) in step T is forwarded in step T+1.
#include <algorithm>
#include <cstdint>
#include <span>

#include "collective/algorithms.h"

namespace tb::collective::detail {
namespace {

int heap_depth(int v) {
  int d = 0;
  for (; v > 0; v = (v - 1) / 2) ++d;
  return d;
}

// Position <-> rank over `order` (empty: rank order), rotated so `root` is position 0.
struct Positions {
  const std::vector<int>& order;
  int size, base;
  Positions(const std::vector<int>& o, int size, int root)
      : order(o), size(size), base(o.empty() ? root : pos(o, root)) {}
  static int pos(const std::vector<int>& o, int rank) {
    return static_cast<int>(std::find(o.begin(), o.end(), rank) - o.begin());
  }
  int v_of(int rank) const {
    return ((order.empty() ? rank : pos(order, rank)) - base + size) % size;
  }
  int rank_of(int v) const {
    const int p = (v + base) % size;
    return order.empty() ? p : order[static_cast<size_t>(p)];
  }
};

struct Chunks {
  size_t per, count, n;
  Chunks(size_t count, size_t es)
      : per(std::max<size_t>(1, kSliceBytes / es)), count(count), n((count + per - 1) / per) {}
  // Chunk index i as [lo, lo + len) elements, or false when i is out of range.
  bool at(int64_t i, size_t* lo, size_t* len) const {
    if (i < 0 || static_cast<size_t>(i) >= n) return false;
    *lo = static_cast<size_t>(i) * per;
    *len = std::min(per, count - *lo);
    return true;
  }
};

// The up half of step T: receive children's chunk T-h+1 into tmp (reduced by finish_up), send
// chunk T-h to the parent from where `src` says.
struct Up {
  const TreePos& p;
  const std::byte* in;
  std::byte* out;  // nullptr: reduced chunks go to two alternating work chunks
  size_t es;
  DataType t;
  RedOp op;
  const Chunks& ch;
  std::byte* tmp[2] = {nullptr, nullptr};
  std::byte* work = nullptr;
  int h;

  Up(Comm& c, const TreePos& p, const std::byte* in, std::byte* out, DataType t, RedOp op,
     const Chunks& ch)
      : p(p), in(in), out(out), es(type_size(t)), t(t), op(op), ch(ch), h(p.height - p.depth) {
    TB_CHECK(p.children.size() <= 2);
    for (size_t i = 0; i < p.children.size(); ++i)
      tmp[i] = c.scratch(kSlotRecv + static_cast<int>(i), ch.per * es);
    if (!out && !p.children.empty() && p.parent >= 0) work = c.scratch(kSlotWork, 2 * ch.per * es);
  }
  // Where chunk i's reduction lives (a leaf's is its input).
  const std::byte* reduced(int64_t i, size_t lo) const {
    if (p.children.empty()) return in + lo * es;
    if (out) return out + lo * es;
    return work + static_cast<size_t>(i % 2) * ch.per * es;
  }
  void add(int64_t T, std::vector<Xfer>& x) const {
    size_t lo, len;
    if (!p.children.empty() && ch.at(T - h + 1, &lo, &len))
      for (size_t i = 0; i < p.children.size(); ++i)
        x.push_back(Xfer::recv(p.children[i], tmp[i], len * es));
    if (p.parent >= 0 && ch.at(T - h, &lo, &len))
      x.push_back(Xfer::send(p.parent, reduced(T - h, lo), len * es));
  }
  void finish(int64_t T) const {
    size_t lo, len;
    if (p.children.empty() || !ch.at(T - h + 1, &lo, &len)) return;
    auto* dst = const_cast<std::byte*>(reduced(T - h + 1, lo));
    reduce_to(dst, in + lo * es, tmp[0], len, t, op);
    for (size_t i = 1; i < p.children.size(); ++i) reduce_into(dst, tmp[i], len, t, op);
  }
};

// The down half of step T over buf.
void add_down(const TreePos& p, std::byte* buf, size_t es, const Chunks& ch, int64_t T,
              std::vector<Xfer>& x) {
  size_t lo, len;
  if (p.parent >= 0 && ch.at(T - p.height - p.depth + 1, &lo, &len))
    x.push_back(Xfer::recv(p.parent, buf + lo * es, len * es));
  if (ch.at(T - p.height - p.depth, &lo, &len))
    for (int child : p.children) x.push_back(Xfer::send(child, buf + lo * es, len * es));
}

}  // namespace

TreePos tree_pos(int rank, int size, int root, const std::vector<int>& order) {
  const Positions at(order, size, root);
  const int v = at.v_of(rank);
  TreePos p;
  p.parent = v == 0 ? -1 : at.rank_of((v - 1) / 2);
  for (int cv : {2 * v + 1, 2 * v + 2})
    if (cv < size) p.children.push_back(at.rank_of(cv));
  p.depth = heap_depth(v);
  p.height = heap_depth(size - 1);
  return p;
}

TreePos chain_pos(int rank, int size, int root, const std::vector<int>& order) {
  const Positions at(order, size, root);
  const int v = at.v_of(rank);
  TreePos p;
  p.parent = v == 0 ? -1 : at.rank_of(v - 1);
  if (v + 1 < size) p.children.push_back(at.rank_of(v + 1));
  p.depth = v;
  p.height = size - 1;
  return p;
}

Status pipeline_up(Comm& c, const TreePos& p, const std::byte* in, std::byte* out, size_t count,
                   DataType t, RedOp op) {
  const Chunks ch(count, type_size(t));
  const Up up(c, p, in, p.parent < 0 ? out : nullptr, t, op, ch);
  std::vector<Xfer> x;
  const int64_t last = static_cast<int64_t>(ch.n) - 1 + p.height;
  for (int64_t T = 0; T <= last; ++T) {
    x.clear();
    up.add(T, x);
    if (!x.empty()) TB_TRY(c.exchange(x));
    up.finish(T);
  }
  return {};
}

Status pipeline_down(Comm& c, const TreePos& p, std::byte* buf, size_t count, size_t es) {
  const Chunks ch(count, es);
  // The down half with the root at step 0: shift the clock by the height.
  TreePos q = p;
  q.height = 0;
  std::vector<Xfer> x;
  const int64_t last = static_cast<int64_t>(ch.n) - 1 + p.height;
  for (int64_t T = 0; T <= last; ++T) {
    x.clear();
    add_down(q, buf, es, ch, T, x);
    if (!x.empty()) TB_TRY(c.exchange(x));
  }
  return {};
}

Status tree_allreduce(Comm& c, const TreePos& p, const std::byte* in, std::byte* out, size_t count,
                      DataType t, RedOp op) {
  const size_t es = type_size(t);
  const Chunks ch(count, es);
  const Up up(c, p, in, out, t, op, ch);
  std::vector<Xfer> x;
  const int64_t last = static_cast<int64_t>(ch.n) - 1 + 2 * static_cast<int64_t>(p.height);
  for (int64_t T = 0; T <= last; ++T) {
    x.clear();
    up.add(T, x);
    add_down(p, out, es, ch, T, x);
    if (!x.empty()) TB_TRY(c.exchange(x));
    up.finish(T);
  }
  return {};
}

}  // namespace tb::collective::detail
