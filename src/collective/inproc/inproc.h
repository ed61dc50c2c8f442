// InprocComm: ranks as threads in one process, for unit tests of the algorithms. Sends copy
// into an unbounded per-direction byte stream and never block; receives wait (bounded by the
// timeout) for the bytes. When any rank fails, the hub is poisoned and every rank's pending
// and later exchanges fail with that rank's error — the "first error reaches every waiter"
// rule, testable without sockets.
//
// The hub is shared by its comms (shared_ptr); each InprocComm is used by one thread.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "collective/comm.h"

namespace tb::collective {

class InprocHub;

class InprocComm final : public Comm {
 public:
  InprocComm(std::shared_ptr<InprocHub> hub, int rank, int size, std::chrono::milliseconds timeout);

 protected:
  Status do_exchange(std::span<const Xfer> xfers) override;
  void abort() override;

 private:
  std::shared_ptr<InprocHub> hub_;
  std::chrono::milliseconds timeout_;
};

// `size` comms sharing one hub; hand comms[i] to thread i.
std::vector<std::unique_ptr<InprocComm>> make_inproc_comms(
    int size, std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace tb::collective
