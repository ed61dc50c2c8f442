// The Gloo calls behind the Gloo Impl (gloo_impl.h): one function per collective, typed by
// element. Internal to workload/gloo_impl*.cc.
//
// GlooOps owns the legacy algorithm objects it caches (and the buffers they are bound to); the
// Gloo context is shared with the Impl. Calls throw what Gloo throws (gloo::Exception and
// friends); the Impl catches. The caller has checked the call (algorithm supported, root in
// range, counts that fit Gloo's int counts, non-null buffers, count > 0).
// Not thread-safe: one rank's calls, in order.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "collective/types.h"

namespace gloo {
class Context;
class Algorithm;
}  // namespace gloo

namespace tb::workload::gloo_detail {

// What the legacy algorithms count in: elements and bytes are `int` in their constructors.
bool fits_legacy(const collective::Call& call, int size);

class GlooOps {
 public:
  GlooOps(std::shared_ptr<gloo::Context> ctx, std::chrono::milliseconds timeout);
  ~GlooOps();
  GlooOps(const GlooOps&) = delete;
  GlooOps& operator=(const GlooOps&) = delete;

  void run(const collective::Call& call);
  // Destroys the cached legacy algorithms; what their destructors throw is swallowed.
  void drop_cache() noexcept;

 private:
  // A legacy algorithm and the buffer it is bound to, kept across calls. The key holds no
  // buffer address, so every rank builds (and takes Gloo slots) at the same call.
  using Key = std::tuple<collective::Coll, collective::Algo, collective::DataType,
                         collective::RedOp, size_t>;
  struct Entry {
    std::vector<std::byte> work;
    std::unique_ptr<gloo::Algorithm> algo;
    uint64_t last_use = 0;
  };
  static constexpr size_t kMaxEntries = 8;

  template <class T>
  void run_typed(const collective::Call& call);
  template <class T>
  void allreduce_ring(const collective::Call& call);
  template <class T>
  void allreduce_hd(const collective::Call& call);
  template <class T>
  void allgather(const collective::Call& call);
  template <class T>
  void reduce_scatter(const collective::Call& call);
  template <class T>
  void broadcast(const collective::Call& call);
  template <class T>
  void reduce(const collective::Call& call);
  template <class T>
  void alltoall(const collective::Call& call);
  template <class T>
  void sendrecv(const collective::Call& call);

  // The cached entry for `key`, or a new one with `bytes` of work buffer (algo unset);
  // evicts the least recently used beyond kMaxEntries.
  Entry& entry(const Key& key, size_t bytes);

  std::shared_ptr<gloo::Context> ctx_;
  std::chrono::milliseconds timeout_;
  std::map<Key, Entry> cache_;
  uint64_t clock_ = 0;
  std::vector<std::byte> scratch_;  // reduce's output on non-root ranks
};

}  // namespace tb::workload::gloo_detail
