#include "collective/collective.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "collective/algorithms.h"

namespace tb::collective {
namespace {

using detail::split;

// Position p of the ring holds rank order[p]'s block of `count` elements.
detail::Blocks rank_blocks(const std::vector<int>& order, size_t count) {
  detail::Blocks b;
  for (int r : order) b.emplace_back(static_cast<size_t>(r) * count, count);
  return b;
}

int position_of(const std::vector<int>& order, int rank) {
  return static_cast<int>(std::find(order.begin(), order.end(), rank) - order.begin());
}

// Whether [a, a + bytes) and [b, b + bytes) share a byte.
bool overlap(const void* a, const void* b, size_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return bytes > 0 && x < y + bytes && y < x + bytes;
}

void copy_if_apart(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
}

Status allreduce(Comm& c, const Call& k) {
  const size_t es = type_size(k.type);
  const auto* in = static_cast<const std::byte*>(k.send);
  auto* buf = static_cast<std::byte*>(k.recv);
  if (c.size() == 1 || k.count == 0) {
    copy_if_apart(buf, in, k.count * es);
    return {};
  }
  switch (k.algo) {
    case Algo::kRing: {  // reads send, writes recv: no copy first
      const auto blocks = detail::blocks_of(split(k.count, c.size()));
      const auto order = detail::ring_order(c);
      const int me = position_of(order, c.rank());
      TB_TRY(detail::ring_reduce_scatter(c, order, me, in, buf, blocks, k.type, k.op));
      return detail::ring_all_gather(c, order, me, buf, blocks, es);
    }
    case Algo::kTree:
      return detail::tree_allreduce(c, detail::tree_pos(c.rank(), c.size(), 0, {}), in, buf,
                                    k.count, k.type, k.op);
    case Algo::kHalvingDoubling:
      copy_if_apart(buf, in, k.count * es);
      return detail::allreduce_hd(c, buf, k.count, k.type, k.op);
    case Algo::kHier:
      copy_if_apart(buf, in, k.count * es);
      return detail::allreduce_hier(c, buf, k.count, k.type, k.op);
  }
  return {};
}

// Broadcast and Reduce: a binary tree in rank order (tree), or a chain along the node-aware
// ring order (ring), so each hop between servers joins two GPUs of one rail.
detail::TreePos links(Comm& c, const Call& k) {
  if (k.algo == Algo::kTree) return detail::tree_pos(c.rank(), c.size(), k.root, {});
  return detail::chain_pos(c.rank(), c.size(), k.root, detail::ring_order(c));
}

Status broadcast(Comm& c, const Call& k) {
  const size_t es = type_size(k.type);
  auto* buf = static_cast<std::byte*>(k.recv);
  if (c.rank() == k.root) copy_if_apart(buf, k.send, k.count * es);
  if (c.size() == 1 || k.count == 0) return {};
  return detail::pipeline_down(c, links(c, k), buf, k.count, es);
}

Status reduce(Comm& c, const Call& k) {
  const size_t es = type_size(k.type);
  // The root reduces into its recv buffer; the others forward reduced chunks from scratch
  // (their recv buffer is the root's business only) and copy nothing.
  auto* out = c.rank() == k.root ? static_cast<std::byte*>(k.recv) : nullptr;
  if (c.size() == 1 || k.count == 0) {
    if (out) copy_if_apart(out, k.send, k.count * es);
    return {};
  }
  return detail::pipeline_up(c, links(c, k), static_cast<const std::byte*>(k.send), out, k.count,
                             k.type, k.op);
}

Status allgather(Comm& c, const Call& k) {
  const size_t es = type_size(k.type);
  auto* buf = static_cast<std::byte*>(k.recv);
  copy_if_apart(buf + static_cast<size_t>(c.rank()) * k.count * es, k.send, k.count * es);
  if (c.size() == 1 || k.count == 0) return {};
  const auto order = detail::ring_order(c);
  return detail::ring_all_gather(c, order, position_of(order, c.rank()), buf,
                                 rank_blocks(order, k.count), es);
}

Status reducescatter(Comm& c, const Call& k) {
  const size_t es = type_size(k.type);
  const size_t mine = static_cast<size_t>(c.rank()) * k.count * es;
  if (c.size() == 1 || k.count == 0) {
    copy_if_apart(k.recv, static_cast<const std::byte*>(k.send) + mine, k.count * es);
    return {};
  }
  // Reads send, reduces into the communicator's scratch; only the own block is copied out.
  const size_t total = k.count * static_cast<size_t>(c.size());
  std::byte* work = c.scratch(detail::kSlotWhole, total * es);
  const auto order = detail::ring_order(c);
  TB_TRY(detail::ring_reduce_scatter(c, order, position_of(order, c.rank()),
                                     static_cast<const std::byte*>(k.send), work,
                                     rank_blocks(order, k.count), k.type, k.op));
  std::memcpy(k.recv, work + mine, k.count * es);
  return {};
}

Status alltoall(Comm& c, const Call& k) {
  const size_t block = k.count * type_size(k.type);
  const size_t total = block * static_cast<size_t>(c.size());
  const auto* in = static_cast<const std::byte*>(k.send);
  auto* out = static_cast<std::byte*>(k.recv);
  // In place (send == recv): every block is sent and overwritten in the same exchange, and a
  // transport may land a peer's block before it sent ours from the same bytes (TCP serves
  // receives first). Stage the outgoing blocks first.
  std::vector<std::byte> staged;
  if (c.size() > 1 && block > 0 && overlap(in, out, total)) {
    staged.assign(in, in + total);
    in = staged.data();
  }
  const size_t r = static_cast<size_t>(c.rank());
  copy_if_apart(out + r * block, in + r * block, block);
  if (c.size() == 1 || block == 0) return {};
  std::vector<Xfer> x;
  for (int s = 1; s < c.size(); ++s) {  // staggered so that not every rank starts at rank 0
    const int to = (c.rank() + s) % c.size(), from = (c.rank() - s + c.size()) % c.size();
    x.push_back(Xfer::send(to, in + static_cast<size_t>(to) * block, block));
    x.push_back(Xfer::recv(from, out + static_cast<size_t>(from) * block, block));
  }
  return c.exchange(x);
}

Status sendrecv(Comm& c, const Call& k) {
  const size_t bytes = k.count * type_size(k.type);
  const int next = (c.rank() + 1) % c.size(), prev = (c.rank() - 1 + c.size()) % c.size();
  if (bytes == 0) return {};
  if (k.send == k.recv && c.size() > 1) {  // in place: the outgoing bytes need a copy first
    std::vector<std::byte> out(static_cast<const std::byte*>(k.send),
                               static_cast<const std::byte*>(k.send) + bytes);
    return c.exchange({Xfer::send(next, out.data(), bytes), Xfer::recv(prev, k.recv, bytes)});
  }
  return c.exchange({Xfer::send(next, k.send, bytes), Xfer::recv(prev, k.recv, bytes)});
}

// Buffers may overlap only in nccl-tests' in-place layouts (types.h).
Status check_aliasing(const Comm& comm, const Call& k) {
  if (k.send == nullptr || k.recv == nullptr || k.count == 0) return {};
  const size_t es = type_size(k.type);
  const auto s = reinterpret_cast<uintptr_t>(k.send), r = reinterpret_cast<uintptr_t>(k.recv);
  const size_t sb = send_elems(k.coll, k.count, comm.size()) * es;
  const size_t rb = recv_elems(k.coll, k.count, comm.size()) * es;
  if (s + sb <= r || r + rb <= s) return {};  // apart
  const size_t mine = static_cast<size_t>(comm.rank()) * k.count * es;
  switch (k.coll) {
    case Coll::kAllGather:
      if (s == r + mine) return {};
      return bad_input("allgather in place needs send = recv + rank * count elements");
    case Coll::kReduceScatter:
      if (r == s + mine) return {};
      return bad_input("reducescatter in place needs recv = send + rank * count elements");
    default:
      if (s == r) return {};
      return bad_input(std::string(name(k.coll)) +
                       ": send and receive buffers overlap without being the same buffer");
  }
}

}  // namespace

Status check(const Comm& comm, const Call& call) {
  const auto& algos = native_algos(call.coll);
  if (std::find(algos.begin(), algos.end(), call.algo) == algos.end()) {
    std::string have;
    for (Algo a : algos) have += (have.empty() ? "" : ", ") + std::string(name(a));
    return bad_input("no " + std::string(name(call.algo)) + " algorithm for " +
                     std::string(name(call.coll)) + "; native has: " + have);
  }
  if (rooted(call.coll) && (call.root < 0 || call.root >= comm.size()))
    return bad_input("root " + std::to_string(call.root) + " is not a rank (0.." +
                     std::to_string(comm.size() - 1) + ")");
  TB_TRY(check_aliasing(comm, call));
  if (call.coll == Coll::kAllReduce && call.algo == Algo::kHier) {
    auto l = detail::hier_layout(comm);
    if (!l) return std::unexpected(l.error());
  }
  return {};
}

Status run(Comm& comm, const Call& k) {
  TB_TRY(check(comm, k));
  if (comm.failed()) return std::unexpected(*comm.failed());
  switch (k.coll) {
    case Coll::kAllReduce:
      return allreduce(comm, k);
    case Coll::kAllGather:
      return allgather(comm, k);
    case Coll::kReduceScatter:
      return reducescatter(comm, k);
    case Coll::kBroadcast:
      return broadcast(comm, k);
    case Coll::kReduce:
      return reduce(comm, k);
    case Coll::kAllToAll:
      return alltoall(comm, k);
    case Coll::kSendRecv:
      return sendrecv(comm, k);
  }
  return {};
}

std::string algo_label(const Call& call) {
  if (call.coll == Coll::kAllToAll) return "direct";
  if (call.coll == Coll::kSendRecv) return "ring shift";
  if ((call.coll == Coll::kBroadcast || call.coll == Coll::kReduce) && call.algo == Algo::kRing)
    return "ring (pipelined chain)";
  return std::string(name(call.algo));
}

}  // namespace tb::collective
