// Comm: one rank's end of a communicator, the transport the native algorithms run on.
//
// The whole transport interface is `exchange`: a set of sends and receives to other ranks
// that all progress together and complete together (a ring step is {send to next, receive
// from previous}). Bytes between two ranks are an ordered stream per direction, so no tags
// are needed as long as every rank issues the same sequence of collectives (as NCCL and Gloo
// require too); a receive of n bytes takes the next n bytes that peer sent.
//
// Failure (Gloo's rule): the first error is kept; every later exchange returns it at once,
// and the transport closes its connections so that peers blocked on this rank fail too
// instead of waiting out their timeouts. Every wait is bounded by the communicator's timeout.
//
// Implementations, one folder each: InprocComm (inproc/: threads in one process, for unit
// tests), TcpComm (tcp/: one process per rank over the lab's links), RdmaComm (rdma/: RC
// queue pairs over the lab's Soft-RoCE devices for the rail pairs, TCP for the rest) and
// ShmComm (shm/: the pairs on one server over shared memory, another Comm for the rest). One
// thread uses a Comm at a time (interrupt() excepted).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"

namespace tb::collective {

// The stripe rule of the transports that spread a transfer over several connections or queue
// pairs (TcpComm's channels, RdmaComm's QPs): one stripe per this many bytes, at least one, at
// most one per connection, so smaller transfers use one.
inline constexpr size_t kMinStripe = 64 * 1024;

struct Xfer {
  enum Kind { kSend, kRecv };
  Kind kind = kSend;
  int peer = 0;
  void* buf = nullptr;  // read for sends, written for receives
  size_t len = 0;       // bytes

  static Xfer send(int peer, const void* buf, size_t len) {
    return {kSend, peer, const_cast<void*>(buf), len};
  }
  static Xfer recv(int peer, void* buf, size_t len) { return {kRecv, peer, buf, len}; }
};

class Comm {
 public:
  Comm(int rank, int size) : rank_(rank), size_(size), node_of_(size, 0) {}
  virtual ~Comm() = default;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Runs every transfer to completion. Transfers to one peer in one direction run in order.
  Status exchange(std::span<const Xfer> xfers);
  Status exchange(std::initializer_list<Xfer> xfers) {
    return exchange(std::span<const Xfer>(xfers.begin(), xfers.size()));
  }

  // Which node (server) each rank is on; hierarchical algorithms group by it. Default: all 0.
  const std::vector<int>& node_of() const { return node_of_; }
  void set_node_of(std::vector<int> node_of) { node_of_ = std::move(node_of); }

  // Bytes the algorithms cut a ring or halving-doubling step into (each received slice is
  // reduced as it lands and forwarded by the next exchange); one exchange per slice. Transports
  // that pipeline a whole step by themselves (TCP's socket buffers, RDMA's posted receives)
  // return kWholeSteps: an exchange costs at least one wake-up.
  static constexpr size_t kWholeSteps = size_t{1} << 40;
  virtual size_t slice_bytes() const { return 256 * 1024; }

  // Scratch memory kept for the communicator's life, so the algorithms allocate and zero
  // nothing per call: slot `slot` holds at least `bytes` (grown on demand, contents
  // unspecified) until the next scratch() call on that slot asks for more.
  std::byte* scratch(int slot, size_t bytes);

  // The stored first error, if any.
  const std::optional<Error>& failed() const { return error_; }
  // Fails the communicator from outside (a watchdog): later exchanges return `e`.
  void fail_with(Error e);
  // Makes the exchange in progress on another thread, and every later one, fail soon with
  // "interrupted"; a transport made of two (RdmaComm, ShmComm) stops its other part this way
  // when one part fails. Thread-safe.
  virtual void interrupt() = 0;

 protected:
  virtual Status do_exchange(std::span<const Xfer> xfers) = 0;
  // Close connections / wake peers after the first error.
  virtual void abort() = 0;

 private:
  int rank_, size_;
  std::vector<int> node_of_;
  std::optional<Error> error_;
  struct Scratch {
    std::unique_ptr<std::byte[]> p;
    size_t bytes = 0;
  };
  std::vector<Scratch> scratch_;
};

}  // namespace tb::collective
