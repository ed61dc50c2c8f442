#include "workload/pattern.h"

#include <algorithm>
#include <cstring>

namespace tb::workload {
namespace {

using collective::Coll;
using collective::DataType;
using collective::RedOp;

int64_t a_of(uint64_t i, uint64_t seed) {
  return static_cast<int64_t>(((i * 2654435761u + seed * 97u) >> 7) % 17) - 8;
}
int64_t b_of(uint64_t i, uint64_t seed) {
  return static_cast<int64_t>(((i * 40503u + seed * 7u) >> 3) % 3) - 1;
}
int64_t value(int r, uint64_t i, uint64_t seed) {
  return a_of(i, seed) + r * b_of(i, seed);
}

int64_t reduced(RedOp op, uint64_t i, int n, uint64_t seed) {
  const int64_t a = a_of(i, seed), b = b_of(i, seed), nn = n;
  switch (op) {
    case RedOp::kSum:
      return nn * a + b * nn * (nn - 1) / 2;
    case RedOp::kMin:
      return a + std::min<int64_t>(0, b * (nn - 1));
    case RedOp::kMax:
      return a + std::max<int64_t>(0, b * (nn - 1));
    case RedOp::kProd: {  // only |v| <= 1 patterns keep products exact; see the bench's check
      int64_t p = 1;
      for (int r = 0; r < n; ++r) p *= value(r, i, seed);
      return p;
    }
  }
  return 0;
}

template <class T>
void fill_typed(T* p, size_t n, int rank, uint64_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(value(rank, i, seed));
}

template <class T>
uint64_t wrong_typed(const collective::Call& k, int r, int n, uint64_t seed) {
  const T* out = static_cast<const T*>(k.recv);
  const uint64_t c = k.count;
  uint64_t wrong = 0;
  auto want_at = [&](uint64_t i) -> int64_t {
    switch (k.coll) {
      case Coll::kAllReduce:
      case Coll::kReduce:
        return reduced(k.op, i, n, seed);
      case Coll::kReduceScatter:
        return reduced(k.op, static_cast<uint64_t>(r) * c + i, n, seed);
      case Coll::kBroadcast:
        return value(k.root, i, seed);
      case Coll::kAllGather:
        return value(static_cast<int>(i / c), i % c, seed);
      case Coll::kAllToAll:
        return value(static_cast<int>(i / c), static_cast<uint64_t>(r) * c + i % c, seed);
      case Coll::kSendRecv:
        return value((r - 1 + n) % n, i, seed);
    }
    return 0;
  };
  if (k.coll == Coll::kReduce && r != k.root) return 0;
  const size_t rn = collective::recv_elems(k.coll, c, n);
  for (size_t i = 0; i < rn; ++i)
    if (out[i] != static_cast<T>(want_at(i))) ++wrong;
  return wrong;
}

}  // namespace

void fill_input(const collective::Call& k, int rank, int size, uint64_t seed) {
  const size_t n = collective::send_elems(k.coll, k.count, size);
  void* p = const_cast<void*>(k.send);
  switch (k.type) {
    case DataType::kFloat32:
      return fill_typed(static_cast<float*>(p), n, rank, seed);
    case DataType::kInt32:
      return fill_typed(static_cast<int32_t*>(p), n, rank, seed);
    case DataType::kFloat64:
      return fill_typed(static_cast<double*>(p), n, rank, seed);
    case DataType::kInt64:
      return fill_typed(static_cast<int64_t*>(p), n, rank, seed);
  }
}

uint64_t count_wrong(const collective::Call& k, int rank, int size, uint64_t seed) {
  switch (k.type) {
    case DataType::kFloat32:
      return wrong_typed<float>(k, rank, size, seed);
    case DataType::kInt32:
      return wrong_typed<int32_t>(k, rank, size, seed);
    case DataType::kFloat64:
      return wrong_typed<double>(k, rank, size, seed);
    case DataType::kInt64:
      return wrong_typed<int64_t>(k, rank, size, seed);
  }
  return 0;
}

void poison_output(const collective::Call& k, int size) {
  const size_t bytes =
      collective::recv_elems(k.coll, k.count, size) * collective::type_size(k.type);
  std::memset(k.recv, 0x7f, bytes);  // 0x7f7f7f7f: a huge float / int, never an expected value
}

}  // namespace tb::workload
