// SlowComm: one rank's end of a communicator behind a slow link, for timeout tests. Each
// exchange runs in rounds of at most `piece` bytes per transfer with `pause` after each round,
// so bytes keep flowing, slowly; after `stall_after` rounds it stops for `stall` (a real stall).
// Wraps another Comm (TcpComm, InprocComm); byte streams have no message boundaries, so the
// peers' exchanges, cut whole, pair up with these pieces.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "collective/comm.h"

namespace tb::testing_util {

class SlowComm final : public collective::Comm {
 public:
  SlowComm(collective::Comm& inner, size_t piece, std::chrono::milliseconds pause,
           int stall_after = -1, std::chrono::milliseconds stall = {})
      : Comm(inner.rank(), inner.size()),
        inner_(inner),
        piece_(piece),
        pause_(pause),
        stall_after_(stall_after),
        stall_(stall) {}

 protected:
  Status do_exchange(std::span<const collective::Xfer> xfers) override {
    size_t longest = 0;
    for (const auto& x : xfers) longest = std::max(longest, x.len);
    std::vector<collective::Xfer> round;
    for (size_t off = 0; off < longest; off += piece_) {
      round.clear();
      for (const auto& x : xfers)
        if (off < x.len)
          round.push_back({x.kind, x.peer, static_cast<std::byte*>(x.buf) + off,
                           std::min(piece_, x.len - off)});
      TB_TRY(inner_.exchange(round));
      std::this_thread::sleep_for(pause_);
      if (++rounds_ == stall_after_) std::this_thread::sleep_for(stall_);
    }
    return {};
  }
  void abort() override { inner_.fail_with(*failed()); }

 public:
  void interrupt() override { inner_.interrupt(); }

 private:
  collective::Comm& inner_;
  size_t piece_;
  std::chrono::milliseconds pause_;
  int stall_after_;
  std::chrono::milliseconds stall_;
  int rounds_ = 0;
};

}  // namespace tb::testing_util
