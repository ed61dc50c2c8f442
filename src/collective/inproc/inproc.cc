#include "collective/inproc/inproc.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>

namespace tb::collective {

using Clock = std::chrono::steady_clock;

class InprocHub {
 public:
  InprocHub(int size, int channels)
      : last_progress(Clock::now()),
        size_(size),
        channels_(channels),
        streams_(static_cast<size_t>(size * size * channels)) {}

  // Unread bytes from one rank to another: data[head, data.size()).
  struct Stream {
    std::vector<std::byte> data;
    size_t head = 0;
    size_t unread() const { return data.size() - head; }
    void push(const std::byte* p, size_t n) {
      if (head > 0 && head == data.size()) {
        data.clear();
        head = 0;
      }
      data.insert(data.end(), p, p + n);
    }
    void pop(std::byte* out, size_t n) {
      std::memcpy(out, data.data() + head, n);
      head += n;
      if (head == data.size()) {
        data.clear();
        head = 0;
      } else if (head > 65536 && head * 2 > data.size()) {
        data.erase(data.begin(), data.begin() + static_cast<ptrdiff_t>(head));
        head = 0;
      }
    }
  };

  Stream& stream(int from, int to, int ch) {
    return streams_[static_cast<size_t>((from * size_ + to) * channels_ + ch)];
  }

  std::mutex mu;
  std::condition_variable cv;
  std::optional<Error> poison;      // the first failing rank's error
  Clock::time_point last_progress;  // when any rank last moved a byte (guarded by mu)

 private:
  int size_, channels_;
  std::vector<Stream> streams_;
};

InprocComm::InprocComm(std::shared_ptr<InprocHub> hub, int rank, int size, const InprocOptions& o)
    : Comm(rank, size), hub_(std::move(hub)), options_(o) {}

Status InprocComm::do_exchange(std::span<const Xfer> xfers) {
  // Per (peer, channel) and direction, the stripes in order and how far the first unfinished
  // one got. Transfers are cut into stripes as TcpComm cuts them.
  struct Stripe {
    std::byte* p;
    size_t len;
  };
  struct Queue {
    std::vector<Stripe> q;
    size_t head = 0, done = 0;
    bool busy() const { return head < q.size(); }
  };
  const int channels = std::max(1, options_.channels);
  const size_t slots = static_cast<size_t>(size() * channels);
  std::vector<Queue> sends(slots), recvs(slots);
  const size_t min_stripe = std::max<size_t>(1, options_.min_stripe);
  for (const auto& x : xfers) {
    const size_t n = std::clamp<size_t>(x.len / min_stripe, 1, static_cast<size_t>(channels));
    for (size_t i = 0; i < n; ++i) {
      const size_t lo = x.len * i / n, hi = x.len * (i + 1) / n;
      auto& q = (x.kind == Xfer::kSend ? sends : recvs)[static_cast<size_t>(x.peer * channels) + i];
      q.q.push_back(Stripe{static_cast<std::byte*>(x.buf) + lo, hi - lo});
    }
  }
  const size_t cap = options_.stream_bytes == 0 ? SIZE_MAX : options_.stream_bytes;

  std::unique_lock lk(hub_->mu);
  hub_->last_progress = Clock::now();  // a rank starting a step is progress too
  for (;;) {
    if (hub_->poison) return std::unexpected(*hub_->poison);
    if (interrupted_.load())
      return fail("rank " + std::to_string(rank()) +
                  ": in-process transfers interrupted (the communicator's other transport failed)");
    bool moved = false, busy = false;
    // Receives first, as TcpComm: a peer's bytes may land before ours leave.
    for (size_t i = 0; i < slots; ++i) {
      auto& rq = recvs[i];
      auto& s =
          hub_->stream(static_cast<int>(i) / channels, rank(), static_cast<int>(i) % channels);
      while (rq.busy() && s.unread() > 0) {
        const Stripe& x = rq.q[rq.head];
        const size_t n = std::min(s.unread(), x.len - rq.done);
        s.pop(x.p + rq.done, n);
        rq.done += n;
        moved = true;
        if (rq.done == x.len) {
          ++rq.head;
          rq.done = 0;
        }
      }
      busy = busy || rq.busy();
    }
    for (size_t i = 0; i < slots; ++i) {
      auto& sq = sends[i];
      auto& s =
          hub_->stream(rank(), static_cast<int>(i) / channels, static_cast<int>(i) % channels);
      while (sq.busy() && s.unread() < cap) {
        const Stripe& x = sq.q[sq.head];
        const size_t n = std::min(cap - s.unread(), x.len - sq.done);
        s.push(x.p + sq.done, n);  // read from the buffer now, not when the exchange began
        sq.done += n;
        moved = true;
        if (sq.done == x.len) {
          ++sq.head;
          sq.done = 0;
        }
      }
      busy = busy || sq.busy();
    }
    if (moved) {
      hub_->last_progress = Clock::now();
      hub_->cv.notify_all();
    }
    if (!busy) return {};
    if (moved) continue;
    // Nothing to move now: wait for any rank to move bytes, up to the timeout since the last
    // byte any rank moved (the collective's progress, not this rank's).
    const auto deadline = hub_->last_progress + options_.timeout;
    if (hub_->cv.wait_until(lk, deadline) == std::cv_status::timeout &&
        Clock::now() >= hub_->last_progress + options_.timeout && !hub_->poison) {
      std::string waiting;
      for (size_t i = 0; i < slots; ++i)
        for (auto* q : {&recvs[i], &sends[i]})
          if (q->busy())
            waiting += (waiting.empty() ? "" : ", ") + std::to_string(q->q[q->head].len - q->done) +
                       " bytes " + (q == &recvs[i] ? "from" : "to") + " rank " +
                       std::to_string(static_cast<int>(i) / channels);
      return fail("rank " + std::to_string(rank()) + ": timed out after " +
                  std::to_string(options_.timeout.count()) +
                  " ms with no rank moving a byte, waiting for " + waiting);
    }
  }
}

void InprocComm::interrupt() {
  interrupted_.store(true);
  std::lock_guard lk(hub_->mu);  // a waiter between its check and its wait sees the notify
  hub_->cv.notify_all();
}

void InprocComm::abort() {
  std::lock_guard lk(hub_->mu);
  if (!hub_->poison) {
    hub_->poison = *failed();
    hub_->poison->message = "rank " + std::to_string(rank()) + " failed: " + failed()->message;
  }
  hub_->cv.notify_all();
}

std::vector<std::unique_ptr<InprocComm>> make_inproc_comms(int size, const InprocOptions& o) {
  auto hub = std::make_shared<InprocHub>(size, std::max(1, o.channels));
  std::vector<std::unique_ptr<InprocComm>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<InprocComm>(hub, r, size, o));
  return out;
}

std::vector<std::unique_ptr<InprocComm>> make_inproc_comms(int size,
                                                           std::chrono::milliseconds timeout) {
  InprocOptions o;
  o.timeout = timeout;
  return make_inproc_comms(size, o);
}

}  // namespace tb::collective
