// Pipelined trees and chains: data moves in chunks so every level of the tree works at once
// (chunk k goes up or down while chunk k+1 arrives), as NCCL's tree and chain do.
#include <algorithm>

#include "collective/algorithms.h"

namespace tb::collective::detail {
namespace {

constexpr size_t kChunkBytes = 256 * 1024;

size_t chunk_elems(size_t es) {
  return std::max<size_t>(1, kChunkBytes / es);
}

}  // namespace

void tree_links(int rank, int size, int root, int* parent, std::vector<int>* children) {
  const int v = (rank - root + size) % size;  // position in a heap-ordered binary tree
  *parent = v == 0 ? -1 : ((v - 1) / 2 + root) % size;
  children->clear();
  for (int cv : {2 * v + 1, 2 * v + 2})
    if (cv < size) children->push_back((cv + root) % size);
}

void chain_links(int rank, int size, int root, int* parent, std::vector<int>* children) {
  const int v = (rank - root + size) % size;
  *parent = v == 0 ? -1 : (rank - 1 + size) % size;
  children->clear();
  if (v + 1 < size) children->push_back((rank + 1) % size);
}

Status pipeline_up(Comm& c, int parent, const std::vector<int>& children, std::byte* buf,
                   size_t count, DataType t, RedOp op) {
  const size_t es = type_size(t), ce = chunk_elems(es);
  const size_t chunks = (count + ce - 1) / ce;
  std::vector<std::vector<std::byte>> tmp(children.size(), std::vector<std::byte>(ce * es));
  std::vector<Xfer> x;
  // Step k: receive chunk k from every child while chunk k-1 (reduced last step) goes up.
  for (size_t k = 0; k <= chunks; ++k) {
    x.clear();
    const size_t lo = k * ce, n = k < chunks ? std::min(ce, count - lo) : 0;
    if (n > 0)
      for (size_t i = 0; i < children.size(); ++i)
        x.push_back(Xfer::recv(children[i], tmp[i].data(), n * es));
    if (k > 0 && parent >= 0) {
      const size_t plo = (k - 1) * ce;
      x.push_back(Xfer::send(parent, buf + plo * es, std::min(ce, count - plo) * es));
    }
    if (!x.empty()) TB_TRY(c.exchange(x));
    if (n > 0)
      for (size_t i = 0; i < children.size(); ++i)
        reduce_into(buf + lo * es, tmp[i].data(), n, t, op);
  }
  return {};
}

Status pipeline_down(Comm& c, int parent, const std::vector<int>& children, std::byte* buf,
                     size_t count, size_t es) {
  const size_t ce = chunk_elems(es);
  const size_t chunks = (count + ce - 1) / ce;
  std::vector<Xfer> x;
  // Step k: receive chunk k from the parent while chunk k-1 goes to the children. The root
  // has every chunk already, so it sends chunk k at step k.
  for (size_t k = 0; k <= chunks; ++k) {
    x.clear();
    if (parent >= 0 && k < chunks) {
      const size_t lo = k * ce;
      x.push_back(Xfer::recv(parent, buf + lo * es, std::min(ce, count - lo) * es));
    }
    const size_t sk = parent >= 0 ? k - 1 : k;  // wraps for k = 0 below the root: skipped
    if ((parent < 0 || k > 0) && sk < chunks) {
      const size_t lo = sk * ce, n = std::min(ce, count - lo);
      for (int ch : children) x.push_back(Xfer::send(ch, buf + lo * es, n * es));
    }
    if (!x.empty()) TB_TRY(c.exchange(x));
  }
  return {};
}

}  // namespace tb::collective::detail
