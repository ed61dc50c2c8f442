#include "collective/types.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/error.h"

namespace tb::collective {
namespace {

template <class E, size_t N>
std::optional<E> find(const std::array<std::pair<std::string_view, E>, N>& table,
                      std::string_view s) {
  for (const auto& [k, v] : table)
    if (k == s) return v;
  return std::nullopt;
}

constexpr std::array<std::pair<std::string_view, Coll>, 7> kColls{{
    {"allreduce", Coll::kAllReduce},
    {"allgather", Coll::kAllGather},
    {"reducescatter", Coll::kReduceScatter},
    {"broadcast", Coll::kBroadcast},
    {"reduce", Coll::kReduce},
    {"alltoall", Coll::kAllToAll},
    {"sendrecv", Coll::kSendRecv},
}};
constexpr std::array<std::pair<std::string_view, Algo>, 4> kAlgos{{
    {"ring", Algo::kRing},
    {"tree", Algo::kTree},
    {"hd", Algo::kHalvingDoubling},
    {"hier", Algo::kHier},
}};
constexpr std::array<std::pair<std::string_view, DataType>, 8> kTypes{{
    {"float", DataType::kFloat32},
    {"int32", DataType::kInt32},
    {"double", DataType::kFloat64},
    {"int64", DataType::kInt64},
    {"float32", DataType::kFloat32},
    {"int", DataType::kInt32},
    {"float64", DataType::kFloat64},
    {"int32_t", DataType::kInt32},
}};
constexpr std::array<std::pair<std::string_view, RedOp>, 4> kOps{{
    {"sum", RedOp::kSum},
    {"min", RedOp::kMin},
    {"max", RedOp::kMax},
    {"prod", RedOp::kProd},
}};

template <class E, size_t N>
std::string_view name_of(const std::array<std::pair<std::string_view, E>, N>& table, E e) {
  for (const auto& [k, v] : table)
    if (v == e) return k;
  TB_CHECK(false);
  return {};
}

template <class T>
void reduce_typed(T* d, const T* s, size_t n, RedOp op) {
  switch (op) {
    case RedOp::kSum:
      for (size_t i = 0; i < n; ++i) d[i] += s[i];
      return;
    case RedOp::kMin:
      for (size_t i = 0; i < n; ++i) d[i] = std::min(d[i], s[i]);
      return;
    case RedOp::kMax:
      for (size_t i = 0; i < n; ++i) d[i] = std::max(d[i], s[i]);
      return;
    case RedOp::kProd:
      for (size_t i = 0; i < n; ++i) d[i] *= s[i];
      return;
  }
}

}  // namespace

std::string_view name(Coll c) {
  return name_of(kColls, c);
}
std::string_view name(Algo a) {
  return name_of(kAlgos, a);
}
std::string_view name(DataType t) {
  return name_of(kTypes, t);
}
std::string_view name(RedOp o) {
  return name_of(kOps, o);
}
std::optional<Coll> parse_coll(std::string_view s) {
  return find(kColls, s);
}
std::optional<Algo> parse_algo(std::string_view s) {
  return find(kAlgos, s);
}
std::optional<DataType> parse_type(std::string_view s) {
  return find(kTypes, s);
}
std::optional<RedOp> parse_op(std::string_view s) {
  return find(kOps, s);
}

size_t type_size(DataType t) {
  switch (t) {
    case DataType::kFloat32:
    case DataType::kInt32:
      return 4;
    case DataType::kFloat64:
    case DataType::kInt64:
      return 8;
  }
  return 4;
}

bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}
bool rooted(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce;
}

const std::vector<Algo>& native_algos(Coll c) {
  static const std::vector<Algo> all_reduce{Algo::kRing, Algo::kTree, Algo::kHalvingDoubling,
                                            Algo::kHier};
  static const std::vector<Algo> ring{Algo::kRing};
  static const std::vector<Algo> ring_tree{Algo::kRing, Algo::kTree};
  switch (c) {
    case Coll::kAllReduce:
      return all_reduce;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
      return ring;
    case Coll::kBroadcast:
    case Coll::kReduce:
      return ring_tree;
    case Coll::kAllToAll:
    case Coll::kSendRecv:
      return ring;
  }
  return ring;
}

size_t send_elems(Coll c, size_t count, int size) {
  const size_t n = static_cast<size_t>(size);
  switch (c) {
    case Coll::kReduceScatter:
    case Coll::kAllToAll:
      return count * n;
    default:
      return count;
  }
}

size_t recv_elems(Coll c, size_t count, int size) {
  const size_t n = static_cast<size_t>(size);
  switch (c) {
    case Coll::kAllGather:
    case Coll::kAllToAll:
      return count * n;
    default:
      return count;
  }
}

void reduce_into(void* dst, const void* src, size_t n, DataType t, RedOp op) {
  switch (t) {
    case DataType::kFloat32:
      return reduce_typed(static_cast<float*>(dst), static_cast<const float*>(src), n, op);
    case DataType::kInt32:
      return reduce_typed(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), n, op);
    case DataType::kFloat64:
      return reduce_typed(static_cast<double*>(dst), static_cast<const double*>(src), n, op);
    case DataType::kInt64:
      return reduce_typed(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), n, op);
  }
}

}  // namespace tb::collective
