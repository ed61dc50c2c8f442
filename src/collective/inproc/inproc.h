// InprocComm: ranks as threads in one process, for unit tests of the algorithms. Each ordered
// pair of ranks has a byte stream per direction and channel. Two modes:
//   unbounded (stream_bytes 0): a send never blocks (its bytes are copied into the stream);
//   bounded (stream_bytes > 0, a few KiB): a stream holds at most that many bytes, so a sender
//     blocks until the receiver reads, as over a socket. Bytes are copied out of the send
//     buffer only as room frees up, and receives are served before sends (as TcpComm does), so
//     aliasing (a buffer overwritten before it was sent), ordering and flow-control bugs
//     (an algorithm that needs a peer to buffer a whole message) show in unit tests.
// An exchange progresses all its transfers at once (receives, then sends, until nothing
// moves), then waits for any rank to move bytes.
//
// Timeout: on the collective, not on one rank. A waiting rank fails only when no rank of the
// hub moved a byte (or started an exchange) for the timeout; a rank idle while the others progress
// (a folded rank of halving-doubling, a tree leaf) waits on. When any rank fails, the hub is
// poisoned and every rank's pending and later exchanges fail with that rank's error — the "first
// error reaches every waiter" rule, testable without sockets.
//
// The hub is shared by its comms (shared_ptr); each InprocComm is used by one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "collective/comm.h"

namespace tb::collective {

class InprocHub;

struct InprocOptions {
  std::chrono::milliseconds timeout{10000};
  size_t stream_bytes = 0;  // 0: unbounded; else the most bytes a stream holds unread
  // Streams per pair and direction (TcpComm's channels): a transfer of len bytes is cut into
  // clamp(len / min_stripe, 1, channels) stripes, one per stream, as TcpComm cuts it, so a
  // receive cut differently from its send shows.
  int channels = 1;
  size_t min_stripe = 64 * 1024;
};

// The bounded mode's stream size the tests use: smaller than most messages they move.
inline constexpr size_t kInprocBoundedBytes = 4096;

class InprocComm final : public Comm {
 public:
  InprocComm(std::shared_ptr<InprocHub> hub, int rank, int size, const InprocOptions& o);
  void interrupt() override;

 protected:
  Status do_exchange(std::span<const Xfer> xfers) override;
  void abort() override;

 private:
  std::shared_ptr<InprocHub> hub_;
  InprocOptions options_;
  std::atomic<bool> interrupted_{false};
};

// `size` comms sharing one hub; hand comms[i] to thread i.
std::vector<std::unique_ptr<InprocComm>> make_inproc_comms(int size, const InprocOptions& o);
std::vector<std::unique_ptr<InprocComm>> make_inproc_comms(
    int size, std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace tb::collective
