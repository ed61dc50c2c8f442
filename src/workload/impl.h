// A collective implementation one rank runs the benchmark through: ours (native, over
// collective::Comm) or Gloo's (the cross-check). The bench loop (workload/bench.h) only
// sees this interface, so both run the same sweep, the same checks and the same timing.
// An Impl belongs to one rank process (or one thread in tests); not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collective/types.h"
#include "core/error.h"

namespace tb::workload {

class Impl {
 public:
  virtual ~Impl() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Whether this implementation has `algo` for `coll`; the error says what it does have.
  virtual Status supports(collective::Coll coll, collective::Algo algo) const = 0;
  // The algorithm this implementation runs for `coll` when the user names none.
  virtual collective::Algo default_algo(collective::Coll coll) const = 0;
  // What actually runs for `call`, for reports: "ring", "gloo AllreduceHalvingDoubling".
  virtual std::string algo_label(const collective::Call& call) const = 0;
  // One collective call; blocks until it completes on this rank, fails on timeout or a peer's
  // failure. After a failure the Impl is unusable and every later call fails at once.
  virtual Status run(const collective::Call& call) = 0;
  // Short description of how it moves bytes, for reports: "native tcp, 4 channels per peer".
  virtual std::string describe() const = 0;
};

}  // namespace tb::workload
