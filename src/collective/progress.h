// ProgressBoard: when each rank of one communicator last moved a byte, shared by the ranks, so
// a transport's timeout can mean "the collective made no progress" rather than "this rank moved
// no byte". A folded rank of halving-doubling or a tree leaf waits through the others' whole
// run; over a slow link that is longer than the timeout while the collective progresses.
//
// It is a small file next to the rendezvous (the FileStore's directory, which every rank sees:
// network namespaces share the filesystem), mapped shared: one 64-byte slot per rank holding
// CLOCK_MONOTONIC ns (one clock for every namespace and process on the host). A rank writes
// its own slot when it moves bytes (a relaxed atomic store, no syscall) and reads every slot
// only when its own wait ran out. Ranks on other hosts would need a network heartbeat instead;
// every rank of a lab runs on this host. The bench launcher watches the same board, so its own
// limit is on no progress too (launch/bench_run.h).
//
// Thread-safe: note() and latest() are atomic accesses to the mapping.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.h"

namespace tb::collective {

// A steady_clock time (CLOCK_MONOTONIC on Linux) as the board's ns.
inline int64_t mono_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Milliseconds from now until `deadline`, within 0..cap: one poll's wait on the way to it.
inline int poll_ms_left(std::chrono::steady_clock::time_point deadline, int cap = 1000) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, cap));
}

class ProgressBoard {
 public:
  // Maps (creating) the board at `path` for `size` ranks, this rank being `rank`.
  static Result<std::unique_ptr<ProgressBoard>> open(const std::string& path, int rank, int size);
  // The same board for a watcher that is no rank (bench's launcher): latest() only.
  static Result<std::unique_ptr<ProgressBoard>> watch(const std::string& path, int size);
  ~ProgressBoard();
  ProgressBoard(const ProgressBoard&) = delete;
  ProgressBoard& operator=(const ProgressBoard&) = delete;

  // This rank moved bytes (or started a step) at `mono_ns`. Not on a watch().
  void note(int64_t mono_ns);
  // The latest time any rank noted (0: none yet).
  int64_t latest() const;

 private:
  ProgressBoard(void* map, size_t bytes, int rank, int size)
      : map_(map), bytes_(bytes), rank_(rank), size_(size) {}
  int64_t* slot(int r) const;

  void* map_;
  size_t bytes_;
  int rank_, size_;
};

}  // namespace tb::collective
