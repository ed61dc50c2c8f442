// What a collective call is: the operation, algorithm, element type, reduction and buffers.
// Shared by the native algorithms (collective/), the Gloo cross-check (workload/gloo_impl)
// and the benchmark (workload/). Plain values and pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tb::collective {

enum class Coll {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kSendRecv
};
enum class Algo { kRing, kTree, kHalvingDoubling, kHier };
enum class DataType { kFloat32, kInt32, kFloat64, kInt64 };
enum class RedOp { kSum, kMin, kMax, kProd };

std::string_view name(Coll c);      // "allreduce"
std::string_view name(Algo a);      // "ring" "tree" "hd" "hier"
std::string_view name(DataType t);  // nccl-tests' names: "float" "int32" "double" "int64"
std::string_view name(RedOp o);     // "sum" "min" "max" "prod"
std::optional<Coll> parse_coll(std::string_view s);
std::optional<Algo> parse_algo(std::string_view s);
std::optional<DataType> parse_type(std::string_view s);  // also "float32", "int", "int32_t"
std::optional<RedOp> parse_op(std::string_view s);

size_t type_size(DataType t);
// Whether the collective reduces (has a meaningful redop) / has a root.
bool reduces(Coll c);
bool rooted(Coll c);

// Algorithms each collective implements natively; the first is the default.
const std::vector<Algo>& native_algos(Coll c);

// One collective call on one rank. `count` is per nccl-tests' convention:
//   AllReduce, Broadcast, Reduce, SendRecv: elements in send and recv buffers;
//   AllGather:     send has count, recv has count * size (rank r's block at r * count);
//   ReduceScatter: send has count * size, recv has count (rank r gets block r);
//   AllToAll:      send and recv have count * size; block j of rank i's send lands in
//                  block i of rank j's recv.
//   SendRecv:      rank r sends to (r + 1) % size and receives from (r - 1 + size) % size.
// In place (nccl-tests' layouts) works for every collective: send == recv, except AllGather
// (send = recv + rank * count elements: this rank's block of the output) and ReduceScatter
// (recv = send + rank * count elements); check() refuses any other overlap. Reduce writes
// `recv` on the root only; Broadcast reads `send` on the root only.
struct Call {
  Coll coll = Coll::kAllReduce;
  Algo algo = Algo::kRing;
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
};

// Elements in the send and receive buffers a Call needs on a communicator of `size`.
size_t send_elems(Coll c, size_t count, int size);
size_t recv_elems(Coll c, size_t count, int size);

// dst[i] = op(dst[i], src[i]) for n elements of type t.
void reduce_into(void* dst, const void* src, size_t n, DataType t, RedOp op);

}  // namespace tb::collective
