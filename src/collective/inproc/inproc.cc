#include "collective/inproc/inproc.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>

namespace tb::collective {

class InprocHub {
 public:
  explicit InprocHub(int size) : size_(size), streams_(static_cast<size_t>(size * size)) {}

  struct Stream {
    std::deque<std::vector<std::byte>> chunks;
    size_t front_off = 0;
  };

  Stream& stream(int from, int to) { return streams_[static_cast<size_t>(from * size_ + to)]; }

  std::mutex mu;
  std::condition_variable cv;
  std::optional<Error> poison;  // the first failing rank's error

 private:
  int size_;
  std::vector<Stream> streams_;
};

InprocComm::InprocComm(std::shared_ptr<InprocHub> hub, int rank, int size,
                       std::chrono::milliseconds timeout)
    : Comm(rank, size), hub_(std::move(hub)), timeout_(timeout) {}

Status InprocComm::do_exchange(std::span<const Xfer> xfers) {
  std::unique_lock lk(hub_->mu);
  if (hub_->poison) return std::unexpected(*hub_->poison);
  for (const auto& x : xfers) {
    if (x.kind != Xfer::kSend) continue;
    const auto* b = static_cast<const std::byte*>(x.buf);
    hub_->stream(rank(), x.peer).chunks.emplace_back(b, b + x.len);
  }
  hub_->cv.notify_all();
  for (const auto& x : xfers) {
    if (x.kind != Xfer::kRecv) continue;
    auto& s = hub_->stream(x.peer, rank());
    auto* out = static_cast<std::byte*>(x.buf);
    size_t got = 0;
    while (got < x.len) {
      if (hub_->poison) return std::unexpected(*hub_->poison);
      if (s.chunks.empty()) {
        if (hub_->cv.wait_for(lk, timeout_) == std::cv_status::timeout && s.chunks.empty() &&
            !hub_->poison)
          return fail("rank " + std::to_string(rank()) + ": timed out after " +
                      std::to_string(timeout_.count()) + " ms waiting for " +
                      std::to_string(x.len - got) + " bytes from rank " + std::to_string(x.peer));
        continue;
      }
      auto& c = s.chunks.front();
      const size_t n = std::min(c.size() - s.front_off, x.len - got);
      std::memcpy(out + got, c.data() + s.front_off, n);
      got += n;
      s.front_off += n;
      if (s.front_off == c.size()) {
        s.chunks.pop_front();
        s.front_off = 0;
      }
    }
  }
  return {};
}

void InprocComm::abort() {
  std::lock_guard lk(hub_->mu);
  if (!hub_->poison) {
    hub_->poison = *failed();
    hub_->poison->message = "rank " + std::to_string(rank()) + " failed: " + failed()->message;
  }
  hub_->cv.notify_all();
}

std::vector<std::unique_ptr<InprocComm>> make_inproc_comms(int size,
                                                           std::chrono::milliseconds timeout) {
  auto hub = std::make_shared<InprocHub>(size);
  std::vector<std::unique_ptr<InprocComm>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<InprocComm>(hub, r, size, timeout));
  return out;
}

}  // namespace tb::collective
