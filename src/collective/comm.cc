#include "collective/comm.h"

#include <cstring>

namespace tb::collective {

Status Comm::exchange(std::span<const Xfer> xfers) {
  if (error_) return std::unexpected(*error_);
  // Transfers to oneself are copies: pair each send to self with the next receive from self.
  std::vector<Xfer> rest;
  rest.reserve(xfers.size());
  std::vector<const Xfer*> self_sends, self_recvs;
  for (const auto& x : xfers) {
    TB_CHECK(x.peer >= 0 && x.peer < size_);
    if (x.peer != rank_) {
      if (x.len > 0) rest.push_back(x);
    } else if (x.kind == Xfer::kSend) {
      self_sends.push_back(&x);
    } else {
      self_recvs.push_back(&x);
    }
  }
  TB_CHECK(self_sends.size() == self_recvs.size());
  for (size_t i = 0; i < self_sends.size(); ++i) {
    TB_CHECK(self_sends[i]->len == self_recvs[i]->len);
    if (self_sends[i]->buf != self_recvs[i]->buf && self_sends[i]->len > 0)
      std::memmove(self_recvs[i]->buf, self_sends[i]->buf, self_sends[i]->len);
  }
  if (rest.empty()) return {};
  if (auto st = do_exchange(rest); !st) {
    fail_with(st.error());
    return st;
  }
  return {};
}

std::byte* Comm::scratch(int slot, size_t bytes) {
  TB_CHECK(slot >= 0);
  if (static_cast<size_t>(slot) >= scratch_.size()) scratch_.resize(static_cast<size_t>(slot) + 1);
  Scratch& s = scratch_[static_cast<size_t>(slot)];
  if (s.bytes < bytes) {
    s.p.reset(new std::byte[bytes]);  // default-initialised: not zeroed
    s.bytes = bytes;
  }
  return s.p.get();
}

void Comm::fail_with(Error e) {
  if (error_) return;
  error_ = std::move(e);
  abort();
}

}  // namespace tb::collective
