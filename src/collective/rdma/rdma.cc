#include "collective/rdma/rdma.h"

#include <poll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "collective/rdma/state.h"

namespace tb::collective {
namespace {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC: the progress board's clock
using rdma::Qp;

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

void add_unique(std::vector<std::string>& v, const std::string& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

// 4.096 us * 2^t, in ms (IBA 9.7.6.1.3, the local ACK timeout).
double ack_timeout_ms(int t) {
  return 4.096e-3 * std::ldexp(1.0, t);
}

std::string fmt_ms(double ms) {
  char b[32];
  std::snprintf(b, sizeof b, ms < 10 ? "%.2f" : "%.1f", ms);
  return b;
}

}  // namespace

Status validate_rdma_tuning(int qps, int ib_timeout, int ib_retry_cnt) {
  if (!kQpsRange.contains(qps))
    return bad_input("--qps: " + std::to_string(qps) + " is not " + kQpsRange.text() +
                     " (queue pairs per peer)");
  if (!kIbTimeoutRange.contains(ib_timeout))
    return bad_input("--ib-timeout: " + std::to_string(ib_timeout) + " is not " +
                     kIbTimeoutRange.text() + " (the ACK timeout is 4.096 us * 2^T)");
  if (!kIbRetryCntRange.contains(ib_retry_cnt))
    return bad_input("--ib-retry-cnt: " + std::to_string(ib_retry_cnt) + " is not " +
                     kIbRetryCntRange.text());
  return {};
}

Status validate(const RdmaOptions& o) {
  TB_TRY(validate_rdma_tuning(o.qps, o.ib_timeout, o.ib_retry_cnt));
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    return bad_input("rdma: rank " + std::to_string(o.rank) + " is not in 0.." +
                     std::to_string(o.size - 1));
  if (static_cast<int>(o.peers.size()) != o.size || static_cast<int>(o.rdma.size()) != o.size)
    return bad_input("rdma: peers and rdma flags must have one entry per rank (" +
                     std::to_string(o.size) + ")");
  if (!kChannelsRange.contains(o.channels))
    return bad_input("--channels: must be " + kChannelsRange.text());
  if (o.timeout.count() < 1) return bad_input("--timeout: must be positive");
  if (!o.use.empty() && static_cast<int>(o.use.size()) != o.size)
    return bad_input("rdma: use flags must have one entry per rank (" + std::to_string(o.size) +
                     ")");
  for (int j = 0; j < o.size; ++j) {
    const auto& p = o.peers[static_cast<size_t>(j)];
    if (j == o.rank || !o.rdma[static_cast<size_t>(j)]) continue;
    if (p.src.empty() || (j < o.rank && p.dst.empty()))
      return bad_input("rdma: rank " + std::to_string(o.rank) + " <-> rank " + std::to_string(j) +
                       " is marked RDMA but has no address on its tier (" + p.tier + ")");
  }
  return {};
}

std::string RdmaDescription::to_string() const {
  std::string s = "native over rdma: ";
  if (rdma_peers.empty()) {
    s += "no pair of this rank on RDMA";
  } else {
    s += join(rdma_tiers, "/") + " pairs on RDMA device " + join(devices, ", ") + " (" +
         std::to_string(qps) + " QP(s)/peer, ib_timeout " + std::to_string(ib_timeout) + " (" +
         fmt_ms(ack_timeout_ms(ib_timeout)) + " ms), retry " + std::to_string(ib_retry_cnt) +
         "; SEND/RECV through " + std::to_string(depth) + " x " + std::to_string(chunk / 1024) +
         " KiB buffers per QP and direction)";
  }
  if (!tcp_peers.empty())
    s += ", " + join(tcp_tiers, "/") + " pairs on tcp (" + std::to_string(channels) +
         " connection(s) per peer)";
  return s;
}

RdmaComm::RdmaComm(const RdmaOptions& o)
    : Comm(o.rank, o.size), rdma_(o.rdma), peers_(o.peers), s_(std::make_unique<State>()) {
  s_->o = o;
  rdma_[static_cast<size_t>(o.rank)] = 0;
}

RdmaComm::~RdmaComm() {
  if (!failed() && !interrupted_.load()) drain();
}

void RdmaComm::drain() {
  if (!s_) return;
  const auto deadline = Clock::now() + s_->o.timeout;
  for (;;) {
    bool busy = false;
    for (const auto& q : s_->qps) {
      if (!q->stream || !q->broken.empty() || q->phase != Qp::kConnected) continue;
      ibv_wc wc[16];
      int n = 0;
      while ((n = ibv_poll_cq(q->cq.get(), 16, wc)) > 0)
        for (int i = 0; i < n; ++i) {
          if (wc[i].status != IBV_WC_SUCCESS) {
            q->broken = "failed completion while draining";
            break;
          }
          const auto kind = rdma::wr_kind(wc[i].wr_id);
          if (kind == rdma::kWrSend) q->stream->send_done(rdma::wr_slot(wc[i].wr_id));
          if (kind == rdma::kWrCredit) q->stream->credit_done();
          if (kind == rdma::kWrRecv)
            q->stream->received(rdma::wr_slot(wc[i].wr_id), wc[i].byte_len,
                                rdma::credits_of(wc[i]));
        }
      if (n < 0) q->broken = "ibv_poll_cq failed while draining";
      busy = busy || (q->broken.empty() && !q->stream->drained());
    }
    if (!busy || Clock::now() >= deadline) return;
    // Teardown only: the acknowledgements are a round trip away.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Result<std::unique_ptr<RdmaComm>> RdmaComm::connect(const FileStore& store, const RdmaOptions& o) {
  TB_TRY(validate(o));
  std::unique_ptr<RdmaComm> c(new RdmaComm(o));
  RdmaDescription& d = c->description_;
  d.qps = o.qps;
  d.channels = o.channels;
  d.ib_timeout = o.ib_timeout;
  d.ib_retry_cnt = o.ib_retry_cnt;
  d.depth = rdma::kDepth;
  d.chunk = rdma::kChunk;
  std::vector<char> tcp_mask(static_cast<size_t>(o.size), 0);
  for (int j = 0; j < o.size; ++j) {
    if (j == o.rank) continue;
    if (!o.use.empty() && !o.use[static_cast<size_t>(j)]) {
      c->rdma_[static_cast<size_t>(j)] = 0;
      c->s_->o.rdma[static_cast<size_t>(j)] = 0;
      continue;
    }
    const auto& tier = o.peers[static_cast<size_t>(j)].tier;
    if (c->rdma_[static_cast<size_t>(j)]) {
      d.rdma_peers.push_back(j);
      add_unique(d.rdma_tiers, tier);
    } else {
      tcp_mask[static_cast<size_t>(j)] = 1;
      d.tcp_peers.push_back(j);
      add_unique(d.tcp_tiers, tier);
    }
  }
  auto connect_tcp = [&]() -> Status {
    if (d.tcp_peers.empty()) return {};
    TcpOptions t;
    t.rank = o.rank;
    t.size = o.size;
    t.channels = o.channels;
    t.peers = o.peers;
    t.timeout = o.timeout;
    t.key_prefix = o.key_prefix;
    t.use = tcp_mask;
    auto tcp = TcpComm::connect(store, t);
    if (!tcp) return std::unexpected(tcp.error());
    c->tcp_ = std::move(*tcp);
    return {};
  };
  if (d.rdma_peers.empty()) {
    TB_TRY(connect_tcp());
    return c;
  }
  c->s_->wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!c->s_->wake) return sys_fail("rank " + std::to_string(o.rank) + ": eventfd");
  // The same board as the TCP part's (and ShmComm's): one per communicator.
  auto board = ProgressBoard::open(store.dir() + "/" + o.key_prefix + "progress", o.rank, o.size);
  if (!board) return std::unexpected(with_context(board.error(), "rank " + std::to_string(o.rank)));
  c->board_ = std::move(*board);
  // RDMA first, TCP after: an incoming connection request must be answered while the
  // connecting side's CM still waits for it (left queued behind a slow TCP set-up, the request
  // timed out and rdma_create_qp on it failed with EINVAL, seen in the lab VM with 4 ranks).
  // No cycle: every rank's RDMA phase needs only other ranks' RDMA phases, and TCP's listen
  // backlog accepts whatever order the TCP phases come in.
  TB_TRY(rdma_setup(*c->s_, store, connect_tcp));
  for (const auto& dev : c->s_->devices) d.devices.push_back(dev->name);
  return c;
}

Status RdmaComm::do_exchange(std::span<const Xfer> xfers) {
  std::vector<Xfer> over_tcp, over_rdma;
  for (const auto& x : xfers)
    (rdma_[static_cast<size_t>(x.peer)] ? over_rdma : over_tcp).push_back(x);
  bool interrupted = false;
  if (over_tcp.empty()) return exchange_rdma(over_rdma, &interrupted);
  if (over_rdma.empty()) return tcp_->exchange(over_tcp);
  // Both: TCP on a second thread, RDMA here; whichever fails first stops the other.
  Status tcp_st;
  const int wake = s_->wake.get();
  std::thread tcp_thread([&] {
    tcp_st = tcp_->exchange(over_tcp);
    if (!tcp_st) {
      const uint64_t one = 1;
      [[maybe_unused]] const ssize_t n = ::write(wake, &one, sizeof one);
    }
  });
  Status st = exchange_rdma(over_rdma, &interrupted);
  if (!st && !interrupted) tcp_->interrupt();
  tcp_thread.join();
  uint64_t drained = 0;
  [[maybe_unused]] const ssize_t n = ::read(wake, &drained, sizeof drained);
  if (!st && !interrupted) return st;
  if (!tcp_st) return tcp_st;
  return st;
}

Status RdmaComm::exchange_rdma(std::span<const Xfer> xfers, bool* interrupted) {
  State& s = *s_;
  const std::string me = "rank " + std::to_string(rank());
  std::vector<Qp*> active;
  for (const auto& x : xfers) {
    const size_t n = std::clamp<size_t>(x.len / kMinStripe, 1, static_cast<size_t>(s.o.qps));
    for (size_t k = 0; k < n; ++k) {
      const size_t lo = x.len * k / n, hi = x.len * (k + 1) / n;
      Qp* q = s.pair(x.peer, static_cast<int>(k));
      TB_CHECK(q != nullptr && q->phase == Qp::kConnected);
      if (x.kind == Xfer::kSend)
        q->stream->add_send(static_cast<const char*>(x.buf) + lo, hi - lo);
      else
        q->stream->add_recv(static_cast<char*>(x.buf) + lo, hi - lo);
      if (std::find(active.begin(), active.end(), q) == active.end()) active.push_back(q);
    }
  }
  std::vector<int> repost;
  // Drains q's CQ, hands arrived bytes to the receives, reposts emptied buffers, posts sends.
  auto progress = [&](Qp& q, bool& moved) -> Status {
    ibv_wc wc[16];
    for (;;) {
      const int n = ibv_poll_cq(q.cq.get(), 16, wc);
      if (n < 0) return fail(me + ": ibv_poll_cq for " + rdma::qp_name(s.o, q) + " failed");
      for (int i = 0; i < n; ++i) {
        const auto kind = rdma::wr_kind(wc[i].wr_id);
        if (wc[i].status != IBV_WC_SUCCESS) {
          if (!q.broken.empty()) continue;  // the flushes that follow the first failure
          char vendor[32];
          std::snprintf(vendor, sizeof vendor, "vendor error 0x%x", wc[i].vendor_err);
          q.broken = std::string(kind == rdma::kWrSend ? "sending to " : "receiving from ") +
                     rdma::qp_name(s.o, q) + " on " + q.dev->name + ": work completion " +
                     ibv_wc_status_str(wc[i].status) + " (" + vendor + ")";
          if (wc[i].status == IBV_WC_RETRY_EXC_ERR)
            q.broken += ": no ACK from rank " + std::to_string(q.peer) + " within " +
                        std::to_string(s.o.ib_retry_cnt + 1) + " tries of ib_timeout " +
                        std::to_string(s.o.ib_timeout) + " (" +
                        fmt_ms(ack_timeout_ms(s.o.ib_timeout)) +
                        " ms): it exited or failed, or the path to it is down";
          continue;
        }
        if (kind == rdma::kWrRecv) {
          q.stream->received(rdma::wr_slot(wc[i].wr_id), wc[i].byte_len, rdma::credits_of(wc[i]));
        } else if (kind == rdma::kWrCredit) {
          q.stream->credit_done();
        } else {
          TB_CHECK(kind == rdma::kWrSend);
          q.stream->send_done(rdma::wr_slot(wc[i].wr_id));
        }
        moved = true;
      }
      if (n < 16) break;
    }
    // What arrived before a failure is still the peer's data: hand it over either way.
    repost.clear();
    if (q.stream->consume(repost) > 0) moved = true;
    if (!q.broken.empty()) return {};
    // Receives first: the credits the next message carries count them as posted.
    for (int slot : repost) TB_TRY(rdma::post_recv(q, slot));
    while (auto c = q.stream->next_send()) {
      TB_TRY(rdma::post_send(q, c->slot, c->len, c->credits));
      moved = true;
    }
    if (auto credits = q.stream->next_credit()) TB_TRY(rdma::post_credit(q, *credits));
    return {};
  };
  auto clear = [&] {
    for (Qp* q : active) q->stream->clear_exchange();
  };

  auto idle_deadline = Clock::now() + s.o.timeout;
  board_->note(mono_ns(idle_deadline - s.o.timeout));  // starting a step is progress too
  // The collective progresses while any rank of the communicator moves bytes.
  auto others_progressed = [&] {
    const auto last_any = Clock::time_point(std::chrono::nanoseconds(board_->latest()));
    if (last_any + s.o.timeout <= idle_deadline) return false;
    idle_deadline = last_any + s.o.timeout;
    return true;
  };
  std::vector<pollfd> pfds;
  for (;;) {
    if (interrupted_.load()) {
      *interrupted = true;
      clear();
      return fail(me + ": RDMA transfers interrupted (the communicator's other transport failed)");
    }
    bool moved = false;
    for (Qp* q : active)
      if (auto st = progress(*q, moved); !st) {
        clear();
        return st;
      }
    if (std::all_of(active.begin(), active.end(), [](Qp* q) { return q->stream->done(); }))
      return {};
    for (Qp* q : active)
      if (!q->broken.empty() && !q->stream->done()) {
        clear();
        return fail(me + ": " + q->broken);
      }
    if (moved) {
      const auto now = Clock::now();
      idle_deadline = now + s.o.timeout;
      board_->note(mono_ns(now));
      continue;
    }
    if (Clock::now() >= idle_deadline && !others_progressed()) {
      std::string waiting;
      for (Qp* q : active)
        if (!q->stream->done()) {
          std::string why = q->stream->recvs_done() ? "" : "receive waiting";
          if (*q->stream->send_wait())
            why += (why.empty() ? "" : ", ") + std::string(q->stream->send_wait()) + " (" +
                   std::to_string(q->stream->credits()) + " credit(s), " +
                   std::to_string(q->stream->sends_in_flight()) + " send(s) unacknowledged)";
          waiting += (waiting.empty() ? "" : "; ") + rdma::qp_name(s.o, *q) + ": " + why;
        }
      clear();
      return fail(me + ": timed out: no progress for " + std::to_string(s.o.timeout.count()) +
                  " ms on RDMA transfers with " + waiting +
                  ", nor by any other rank of the communicator");
    }
    // Arm every CQ, then look once more: a completion may have landed before the arming.
    bool armed_now = false;
    for (Qp* q : active)
      if (!q->armed) {
        if (const int rc = ibv_req_notify_cq(q->cq.get(), 0); rc != 0) {
          clear();
          return fail(
              me + ": ibv_req_notify_cq for " + rdma::qp_name(s.o, *q) + ": " + std::strerror(rc),
              rc);
        }
        q->armed = true;
        armed_now = true;
      }
    if (armed_now) continue;

    pfds.clear();
    pfds.push_back(pollfd{s.channel->fd, POLLIN, 0});
    pfds.push_back(pollfd{s.wake.get(), POLLIN, 0});
    for (const auto& d : s.devices) pfds.push_back(pollfd{d->channel->fd, POLLIN, 0});
    const int ready = ::poll(pfds.data(), pfds.size(), poll_ms_left(idle_deadline));
    if (ready < 0 && errno != EINTR) {
      clear();
      return sys_fail(me + ": poll");
    }
    if (ready <= 0) continue;
    if ((pfds[1].revents & POLLIN) && !interrupted_.load()) {
      *interrupted = true;
      clear();
      return fail(me + ": RDMA transfers interrupted (the TCP part failed)");
    }
    // Completion events: acknowledge each at once (ibv_destroy_cq waits for that) and re-arm
    // on the next round.
    for (const auto& d : s.devices) {
      void* ctx = nullptr;
      ibv_cq* cq = nullptr;
      while (ibv_get_cq_event(d->channel.get(), &cq, &ctx) == 0) {
        ibv_ack_cq_events(cq, 1);
        static_cast<Qp*>(ctx)->armed = false;
      }
    }
    // Connection events: a peer that disconnects fails the transfers that still need it.
    for (;;) {
      rdma_cm_event* raw = nullptr;
      if (rdma_get_cm_event(s.channel.get(), &raw) != 0) break;
      rdma::CmEvent e(raw);
      if (e->event == RDMA_CM_EVENT_TIMEWAIT_EXIT) continue;
      auto* q = static_cast<Qp*>(e->id->context);
      if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST || q == nullptr) {
        if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
          rdma_reject(e->id, nullptr, 0);
          rdma_cm_id* stray = e->id;
          e.ack();
          rdma_destroy_id(stray);
        }
        continue;
      }
      if (!q->broken.empty()) continue;
      // A connection-set-up error on an established QP is a late one from its handshake (seen
      // in the lab VM under load: UNREACHABLE, ETIMEDOUT, on a QP that had moved data for
      // seconds, with or without credits); a dead peer shows as DISCONNECTED or as a failed
      // work completion (retry exceeded), so the data path decides.
      if (q->phase == Qp::kConnected &&
          (e->event == RDMA_CM_EVENT_UNREACHABLE || e->event == RDMA_CM_EVENT_CONNECT_ERROR))
        continue;
      if (e->event == RDMA_CM_EVENT_DISCONNECTED)
        q->broken = "rank " + std::to_string(q->peer) + " disconnected (it exited or failed; " +
                    rdma::qp_name(s.o, *q) + ", " + rdma_event_str(e->event) + ")";
      else
        q->broken = rdma::qp_name(s.o, *q) + ": " + rdma_event_str(e->event) + " (status " +
                    std::to_string(e->status) + ")";
    }
  }
}

void RdmaComm::interrupt() {
  interrupted_.store(true);
  if (s_->wake) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(s_->wake.get(), &one, sizeof one);
  }
  if (tcp_) tcp_->interrupt();
}

void RdmaComm::abort() {
  // Disconnecting moves every QP to the error state and sends a DREQ: peers waiting on this
  // rank get RDMA_CM_EVENT_DISCONNECTED now rather than at their timeout.
  if (s_)
    for (const auto& q : s_->qps)
      if (q->id && q->qp.get()) rdma_disconnect(q->id.get());
  if (tcp_ && !tcp_->failed())
    tcp_->fail_with(failed() ? *failed() : Error{"the RDMA part failed", 0, kExitFailed});
}

}  // namespace tb::collective
