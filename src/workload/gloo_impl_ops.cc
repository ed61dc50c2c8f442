// The Gloo calls for each collective; see gloo_impl_ops.h and, for what maps to what,
// gloo_impl.h. Semantics of Gloo 5b14351 this relies on (read from its sources):
//   allreduce/reduce/allgather/alltoall/broadcast return at once for size 1 after copying
//   in -> out; allreduce uses `out` as the input when no input is set (in place);
//   broadcast refuses an input on non-roots and copies in -> out on the root;
//   reduce writes `out` on every rank (it is the ring's scratch), so non-roots get ours;
//   the legacy algorithms reduce in place over their pointer and use the context timeout.
#include "workload/gloo_impl_ops.h"

#include <gloo/algorithm.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/alltoall.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <climits>
#include <cstring>

namespace tb::workload::gloo_detail {

using collective::Algo;
using collective::Call;
using collective::Coll;
using collective::DataType;
using collective::RedOp;

namespace {

// Slot prefix for our send/recv; Gloo's collectives use 0x01..0x08 (gloo/types.h).
constexpr uint8_t kSendRecvSlotPrefix = 0x40;

using OptsFn = void (*)(void*, const void*, const void*, size_t);

template <class T>
OptsFn options_fn(RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return &gloo::sum<T>;
    case RedOp::kMin:
      return &gloo::min<T>;
    case RedOp::kMax:
      return &gloo::max<T>;
    case RedOp::kProd:
      return &gloo::product<T>;
  }
  return &gloo::sum<T>;
}

template <class T>
const gloo::ReductionFunction<T>* legacy_fn(RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return gloo::ReductionFunction<T>::sum;
    case RedOp::kMin:
      return gloo::ReductionFunction<T>::min;
    case RedOp::kMax:
      return gloo::ReductionFunction<T>::max;
    case RedOp::kProd:
      return gloo::ReductionFunction<T>::product;
  }
  return gloo::ReductionFunction<T>::sum;
}

template <class T>
T* mut(const void* p) {
  return static_cast<T*>(const_cast<void*>(p));
}

}  // namespace

bool fits_legacy(const Call& call, int size) {
  const size_t es = collective::type_size(call.type);
  const size_t elems = call.coll == Coll::kReduceScatter ? call.count * size : call.count;
  return elems <= static_cast<size_t>(INT_MAX) / es;
}

GlooOps::GlooOps(std::shared_ptr<gloo::Context> ctx, std::chrono::milliseconds timeout)
    : ctx_(std::move(ctx)), timeout_(timeout) {}

GlooOps::~GlooOps() {
  drop_cache();
}

void GlooOps::drop_cache() noexcept {
  while (!cache_.empty()) {
    try {
      cache_.erase(cache_.begin());
    } catch (...) {  // ~Algorithm is noexcept(false); the entry is gone either way
    }
  }
}

void GlooOps::run(const Call& call) {
  switch (call.type) {
    case DataType::kFloat32:
      return run_typed<float>(call);
    case DataType::kInt32:
      return run_typed<int32_t>(call);
    case DataType::kFloat64:
      return run_typed<double>(call);
    case DataType::kInt64:
      return run_typed<int64_t>(call);
  }
}

template <class T>
void GlooOps::run_typed(const Call& call) {
  switch (call.coll) {
    case Coll::kAllReduce:
      if (call.algo == Algo::kHalvingDoubling) return allreduce_hd<T>(call);
      return allreduce_ring<T>(call);
    case Coll::kAllGather:
      return allgather<T>(call);
    case Coll::kReduceScatter:
      return reduce_scatter<T>(call);
    case Coll::kBroadcast:
      return broadcast<T>(call);
    case Coll::kReduce:
      return reduce<T>(call);
    case Coll::kAllToAll:
      return alltoall<T>(call);
    case Coll::kSendRecv:
      return sendrecv<T>(call);
  }
}

GlooOps::Entry& GlooOps::entry(const Key& key, size_t bytes) {
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    // Every rank makes the same calls, so every rank evicts the same entry here. An entry's
    // last run consumed every message sent to it, so nothing arrives for its slots later.
    while (cache_.size() >= kMaxEntries) {
      auto oldest = cache_.begin();
      for (auto i = cache_.begin(); i != cache_.end(); ++i)
        if (i->second.last_use < oldest->second.last_use) oldest = i;
      cache_.erase(oldest);
    }
    it = cache_.emplace(key, Entry{}).first;
    it->second.work.resize(bytes);
  }
  it->second.last_use = ++clock_;
  return it->second;
}

template <class T>
void GlooOps::allreduce_ring(const Call& call) {
  gloo::AllreduceOptions o(ctx_);
  o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  if (call.send != call.recv) o.setInput<T>(mut<T>(call.send), call.count);
  o.setOutput<T>(static_cast<T*>(call.recv), call.count);
  o.setReduceFunction(options_fn<T>(call.op));
  o.setTag(0);
  o.setTimeout(timeout_);
  gloo::allreduce(o);
}

template <class T>
void GlooOps::allreduce_hd(const Call& call) {
  const size_t bytes = call.count * sizeof(T);
  Entry& e = entry({call.coll, call.algo, call.type, call.op, call.count}, bytes);
  T* work = reinterpret_cast<T*>(e.work.data());
  if (!e.algo) {
    e.algo = std::make_unique<gloo::AllreduceHalvingDoubling<T>>(
        ctx_, std::vector<T*>{work}, static_cast<int>(call.count), legacy_fn<T>(call.op));
  }
  std::memcpy(work, call.send, bytes);
  e.algo->run();
  std::memcpy(call.recv, work, bytes);
}

template <class T>
void GlooOps::allgather(const Call& call) {
  gloo::AllgatherOptions o(ctx_);
  o.setInput<T>(mut<T>(call.send), call.count);
  o.setOutput<T>(static_cast<T*>(call.recv), call.count * ctx_->size);
  o.setTag(0);
  o.setTimeout(timeout_);
  gloo::allgather(o);
}

template <class T>
void GlooOps::reduce_scatter(const Call& call) {
  const size_t n = static_cast<size_t>(ctx_->size);
  const size_t total = call.count * n;
  Entry& e = entry({call.coll, call.algo, call.type, call.op, call.count}, total * sizeof(T));
  T* work = reinterpret_cast<T*>(e.work.data());
  if (!e.algo) {
    e.algo = std::make_unique<gloo::ReduceScatterHalvingDoubling<T>>(
        ctx_, std::vector<T*>{work}, static_cast<int>(total),
        std::vector<int>(n, static_cast<int>(call.count)), legacy_fn<T>(call.op));
  }
  std::memcpy(work, call.send, total * sizeof(T));
  e.algo->run();
  // The algorithm leaves this rank's block at the start of its buffer.
  std::memcpy(call.recv, work, call.count * sizeof(T));
}

template <class T>
void GlooOps::broadcast(const Call& call) {
  gloo::BroadcastOptions o(ctx_);
  if (ctx_->rank == call.root && call.send != call.recv)
    o.setInput<T>(mut<T>(call.send), call.count);
  o.setOutput<T>(static_cast<T*>(call.recv), call.count);
  o.setRoot(call.root);
  o.setTag(0);
  o.setTimeout(timeout_);
  gloo::broadcast(o);
}

template <class T>
void GlooOps::reduce(const Call& call) {
  gloo::ReduceOptions o(ctx_);
  T* out = static_cast<T*>(call.recv);
  if (ctx_->rank != call.root) {
    scratch_.resize(call.count * sizeof(T));
    out = reinterpret_cast<T*>(scratch_.data());
  }
  if (call.send != out) o.setInput<T>(mut<T>(call.send), call.count);
  o.setOutput<T>(out, call.count);
  o.setRoot(call.root);
  o.setReduceFunction(options_fn<T>(call.op));
  o.setTag(0);
  o.setTimeout(timeout_);
  gloo::reduce(o);
}

template <class T>
void GlooOps::alltoall(const Call& call) {
  const size_t elems = call.count * ctx_->size;
  gloo::AlltoallOptions o(ctx_);
  o.setInput<T>(mut<T>(call.send), elems);
  o.setOutput<T>(static_cast<T*>(call.recv), elems);
  o.setTag(0);
  o.setTimeout(timeout_);
  gloo::alltoall(o);
}

template <class T>
void GlooOps::sendrecv(const Call& call) {
  const size_t bytes = call.count * sizeof(T);
  const int n = ctx_->size, r = ctx_->rank;
  if (n == 1) {
    if (call.send != call.recv) std::memmove(call.recv, call.send, bytes);
    return;
  }
  const uint64_t slot = gloo::Slot::build(kSendRecvSlotPrefix, 0);
  auto out = ctx_->createUnboundBuffer(const_cast<void*>(call.send), bytes);
  auto in = ctx_->createUnboundBuffer(call.recv, bytes);
  in->recv((r - 1 + n) % n, slot);
  out->send((r + 1) % n, slot);
  if (!in->waitRecv(timeout_)) GLOO_THROW("send/recv: receive aborted");
  if (!out->waitSend(timeout_)) GLOO_THROW("send/recv: send aborted");
}

}  // namespace tb::workload::gloo_detail
