// RdmaComm's connection set-up through librdmacm: one event loop serves this rank's active
// connections (to lower ranks: resolve address, resolve route, create the QP, connect) and its
// passive ones (from higher ranks: check the private data, create the QP, accept), so no
// order of ranks can deadlock, and every step is bounded by the deadline.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "collective/progress.h"
#include "collective/rdma/state.h"

namespace tb::collective {
namespace {

using Clock = std::chrono::steady_clock;
using rdma::Qp;
constexpr uint32_t kRdmaHelloMagic = 0x74627231;  // "tbr1"

// The connection request's private data (RDMA_PS_TCP carries up to 56 bytes).
struct RdmaHello {
  uint32_t magic;
  int32_t rank;
  int32_t qp;
  int32_t qps;
};

Result<sockaddr_in> ipv4(const std::string& addr, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1)
    return bad_input("not an IPv4 address: '" + addr + "'");
  return sa;
}

sockaddr* as_sa(sockaddr_in& sa) {
  return reinterpret_cast<sockaddr*>(&sa);
}

Status set_nonblocking(int fd, const std::string& what) {
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) return sys_fail(what);
  return {};
}

std::string event_text(const rdma_cm_event* e) {
  std::string s = rdma_event_str(e->event);
  if (e->status < 0) {
    s += " (" + std::string(std::strerror(-e->status)) + ")";
  } else if (e->status > 0) {
    s += " (status " + std::to_string(e->status);
    // IB CM reject reasons (IBA table 112), as the kernel's ibcm_reject_msg names them.
    if (e->event == RDMA_CM_EVENT_REJECTED && e->status == 8)
      s += ": invalid service ID, nobody listens on that port";
    if (e->event == RDMA_CM_EVENT_REJECTED && e->status == 28)
      s += ": consumer defined, the peer refused; see its log";
    s += ")";
  }
  return s;
}

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

class Setup {
 public:
  Setup(RdmaComm::State& s, const FileStore& store)
      : s_(s), o_(s.o), store_(store), me_("rank " + std::to_string(o_.rank)) {}

  Status run(const std::function<Status()>& between);

 private:
  const TcpPeer& peer(int j) const { return o_.peers[static_cast<size_t>(j)]; }
  bool is_rdma(int j) const { return j != o_.rank && o_.rdma[static_cast<size_t>(j)] != 0; }
  std::string what(const Qp& q) const;
  std::string no_device(const std::string& src, const std::string& call, int e) const;

  Status listen();
  Status try_ports();
  Status start_connect(int j, const std::string& dst, int port);
  Status connect_one(int j, int q);
  // Set-up failures of one connection are retried, not fatal (see attempts_).
  void drop_later(Qp* q);
  void drop_now();
  Status retry_later(Qp* q, const std::string& why);
  Status on_event(bool& got);
  Status on_request(rdma_cm_event* e);
  Status make_qp(Qp& q);
  Status on_established(Qp& q);
  rdma::Device* device_for(ibv_context* ctx);
  std::string pending() const;

  RdmaComm::State& s_;
  const RdmaOptions& o_;
  const FileStore& store_;
  Clock::time_point deadline_ = Clock::now();
  std::string me_;
  std::vector<int> need_port_;  // lower RDMA peers whose listener is not known yet
  int expected_ = 0, connected_ = 0;
  // Connection attempts that failed while being set up are retried with a backoff. Seen in the
  // lab VM (7.3 kernel, rxe per namespace): with requests from several ranks at once, a
  // passive side's rdma_create_qp on a request fails with EINVAL now and then, and the active
  // side then sees UNREACHABLE; a second attempt goes through. The passive side rejects such a
  // request and waits for the retry; the active side retries while the set-up's deadline
  // leaves time for the backoff, at most kMaxAttempts times (8 was too few under load: a run in
  // the lab VM on a loaded host failed "REJECTED (after 8 attempts)" with time left).
  static constexpr int kMaxAttempts = 64;
  struct Retry {
    int j, q;
    Clock::time_point at;
  };
  std::vector<Retry> retries_;
  std::map<int, int> attempts_;                        // j * qps + q -> attempts made
  std::map<int, std::pair<std::string, int>> listen_;  // lower peer -> its listener
  std::vector<Qp*> drop_;                              // destroyed once the event is acked
  std::string last_soft_;                              // the latest retried failure
};

std::string Setup::what(const Qp& q) const {
  const std::string tier = peer(q.peer).tier;
  if (q.peer > o_.rank)
    return me_ + ": accept from rank " + std::to_string(q.peer) + " on " + q.src + " (" + tier +
           ", qp " + std::to_string(q.index) + ")";
  return me_ + ": connect " + q.src + " -> rank " + std::to_string(q.peer) + " at " + q.dst + ":" +
         std::to_string(q.port) + " (" + tier + ", qp " + std::to_string(q.index) + ")";
}

std::string Setup::no_device(const std::string& src, const std::string& call, int e) const {
  std::vector<int> users;
  for (int j = 0; j < o_.size; ++j)
    if (is_rdma(j) && peer(j).src == src) users.push_back(j);
  return me_ + ": no RDMA device holds " + src + " (this rank's " +
         (users.empty() ? std::string("RDMA") : peer(users.front()).tier) +
         " address for rank(s) " + join_ints(users) + "): " + call + ": " + std::strerror(e);
}

rdma::Device* Setup::device_for(ibv_context* ctx) {
  for (auto& d : s_.devices)
    if (d->ctx == ctx) return d.get();
  auto d = std::make_unique<rdma::Device>();
  d->ctx = ctx;
  d->name = ctx->device ? ibv_get_device_name(ctx->device) : "?";
  d->pd.reset(ibv_alloc_pd(ctx));
  if (!d->pd) return nullptr;
  d->channel.reset(ibv_create_comp_channel(ctx));
  if (!d->channel) return nullptr;
  s_.devices.push_back(std::move(d));
  return s_.devices.back().get();
}

Status Setup::listen() {
  std::vector<std::string> srcs;
  for (int j = 0; j < o_.size; ++j)
    if (is_rdma(j) && std::find(srcs.begin(), srcs.end(), peer(j).src) == srcs.end())
      srcs.push_back(peer(j).src);
  std::string published;
  for (const auto& src : srcs) {
    rdma_cm_id* raw = nullptr;
    if (rdma_create_id(s_.channel.get(), &raw, nullptr, RDMA_PS_TCP) != 0)
      return sys_fail(me_ + ": rdma_create_id for the listener on " + src);
    rdma::CmId id(raw);
    auto sa = ipv4(src, 0);
    if (!sa) return std::unexpected(with_context(sa.error(), me_ + ": listener"));
    if (rdma_bind_addr(id.get(), as_sa(*sa)) != 0) {
      const int e = errno;
      return fail(no_device(src, "rdma_bind_addr", e), e);
    }
    if (id->verbs == nullptr) return fail(no_device(src, "rdma_bind_addr", ENODEV), ENODEV);
    if (rdma_listen(id.get(), 4 * o_.size * o_.qps + 16) != 0)
      return sys_fail(me_ + ": rdma_listen on " + src);
    const int port = ntohs(rdma_get_src_port(id.get()));
    published += (published.empty() ? "" : " ") + src + ":" + std::to_string(port);
    s_.listeners.push_back(std::move(id));
    s_.listen_addrs.push_back(src);
  }
  return store_.set(o_.key_prefix + "rdmaport." + std::to_string(o_.rank), published);
}

// Lower RDMA peers whose listener is published now get their connections started. Never
// blocks: the store is read once per peer per round.
Status Setup::try_ports() {
  std::vector<int> still;
  for (int j : need_port_) {
    auto v =
        store_.get(o_.key_prefix + "rdmaport." + std::to_string(j), std::chrono::milliseconds(0));
    if (!v) {
      still.push_back(j);
      continue;
    }
    // "addr:port addr:port ...": one entry per listener of rank j.
    std::istringstream in(*v);
    std::string entry;
    int port = 0;
    while (in >> entry) {
      const auto colon = entry.rfind(':');
      if (colon != std::string::npos && entry.substr(0, colon) == peer(j).dst)
        port = std::atoi(entry.c_str() + colon + 1);
    }
    if (port <= 0)
      return fail(me_ + ": rank " + std::to_string(j) + " listens for RDMA on '" + *v +
                  "', not on " + peer(j).dst + " (" + peer(j).tier +
                  "): do both ranks mark this pair RDMA?");
    TB_TRY(start_connect(j, peer(j).dst, port));
  }
  need_port_ = std::move(still);
  return {};
}

Status Setup::start_connect(int j, const std::string& dst, int port) {
  listen_[j] = {dst, port};
  for (int q = 0; q < o_.qps; ++q) TB_TRY(connect_one(j, q));
  return {};
}

Status Setup::connect_one(int j, int q) {
  const auto& [dst, port] = listen_.at(j);
  ++attempts_[j * o_.qps + q];
  auto qp = std::make_unique<Qp>();
  qp->peer = j;
  qp->index = q;
  qp->src = peer(j).src;
  qp->dst = dst;
  qp->port = port;
  qp->phase = Qp::kResolvingAddr;
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(s_.channel.get(), &raw, qp.get(), RDMA_PS_TCP) != 0)
    return sys_fail(what(*qp) + ": rdma_create_id");
  qp->id.reset(raw);
  auto from = ipv4(qp->src, 0);
  auto to = ipv4(dst, static_cast<uint16_t>(port));
  if (!from || !to) return bad_input(what(*qp) + ": bad address");
  if (rdma_resolve_addr(qp->id.get(), as_sa(*from), as_sa(*to),
                        poll_ms_left(deadline_, 5000) + 1) != 0) {
    const int e = errno;
    return fail(no_device(qp->src,
                          "rdma_resolve_addr to rank " + std::to_string(j) + " at " + dst + ":" +
                              std::to_string(port) + " (qp " + std::to_string(q) + ")",
                          e),
                e);
  }
  s_.pair(j, q) = qp.get();
  s_.qps.push_back(std::move(qp));
  return {};
}

void Setup::drop_later(Qp* q) {
  if (s_.pair(q->peer, q->index) == q) s_.pair(q->peer, q->index) = nullptr;
  if (std::find(drop_.begin(), drop_.end(), q) == drop_.end()) drop_.push_back(q);
}

void Setup::drop_now() {
  for (Qp* q : drop_)
    std::erase_if(s_.qps, [&](const std::unique_ptr<Qp>& p) { return p.get() == q; });
  drop_.clear();
}

Status Setup::retry_later(Qp* q, const std::string& why) {
  const int key = q->peer * o_.qps + q->index;
  if (attempts_[key] >= kMaxAttempts)
    return fail(why + " (after " + std::to_string(attempts_[key]) + " attempts)");
  last_soft_ = why;
  // 50, 100, 200 ... ms, staggered by rank so retries from several ranks do not line up again.
  const auto backoff =
      std::chrono::milliseconds((50 << std::min(attempts_[key], 5)) + 7 * (o_.rank % 8));
  if (Clock::now() + backoff >= deadline_)
    return fail(why + " (after " + std::to_string(attempts_[key]) +
                " attempts; the set-up's timeout leaves no time for another)");
  retries_.push_back(Retry{q->peer, q->index, Clock::now() + backoff});
  drop_later(q);
  return {};
}

// PD, CQ, bounce buffers and their MRs, the RC QP, every receive posted, the ACK timeout.
Status Setup::make_qp(Qp& q) {
  const std::string w = what(q);
  ibv_context* ctx = q.id->verbs;
  if (!ctx) return fail(w + ": " + no_device(q.src, "rdma_cm_id", ENODEV), ENODEV);
  q.dev = device_for(ctx);
  if (!q.dev) return sys_fail(w + ": protection domain / completion channel on the device");
  TB_TRY(set_nonblocking(q.dev->channel->fd, w + ": completion channel"));
  q.cq.reset(ibv_create_cq(ctx, rdma::kCqEntries, &q, q.dev->channel.get(), 0));
  if (!q.cq) return sys_fail(w + ": ibv_create_cq on " + q.dev->name);
  const size_t bytes = rdma::kDepth * rdma::kChunk;
  q.send_buf.reset(static_cast<char*>(std::aligned_alloc(4096, bytes)));
  q.recv_buf.reset(static_cast<char*>(std::aligned_alloc(4096, bytes)));
  if (!q.send_buf || !q.recv_buf) return fail(w + ": out of memory for bounce buffers");
  q.send_mr.reset(ibv_reg_mr(q.dev->pd.get(), q.send_buf.get(), bytes, 0));
  if (!q.send_mr) return sys_fail(w + ": ibv_reg_mr (send buffers, " + q.dev->name + ")");
  q.recv_mr.reset(ibv_reg_mr(q.dev->pd.get(), q.recv_buf.get(), bytes, IBV_ACCESS_LOCAL_WRITE));
  if (!q.recv_mr) return sys_fail(w + ": ibv_reg_mr (receive buffers, " + q.dev->name + ")");
  ibv_qp_init_attr attr{};
  attr.send_cq = q.cq.get();
  attr.recv_cq = q.cq.get();
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;
  attr.cap.max_send_wr = rdma::kSendWrs;
  attr.cap.max_recv_wr = rdma::kDepth;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  if (rdma_create_qp(q.id.get(), q.dev->pd.get(), &attr) != 0)
    return sys_fail(w + ": rdma_create_qp on " + q.dev->name);
  q.qp.reset(q.id.get());
  q.stream.emplace(q.send_buf.get(), q.recv_buf.get(), rdma::kDepth, rdma::kChunk);
  // Posted before connecting: the peer's credits start at kDepth (stream.h).
  for (int slot = 0; slot < rdma::kDepth; ++slot) TB_TRY(rdma::post_recv(q, slot));
  uint8_t t = static_cast<uint8_t>(o_.ib_timeout);
  if (rdma_set_option(q.id.get(), RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof t) != 0)
    return sys_fail(w + ": rdma_set_option ACK_TIMEOUT " + std::to_string(o_.ib_timeout));
  return {};
}

Status Setup::on_established(Qp& q) {
  ibv_qp_attr a{};
  a.min_rnr_timer = rdma::kMinRnrTimer;
  if (const int rc = ibv_modify_qp(q.qp.get(), &a, IBV_QP_MIN_RNR_TIMER); rc != 0)
    return fail(what(q) + ": ibv_modify_qp (RTS, min RNR timer " +
                    std::to_string(rdma::kMinRnrTimer) + "): " + std::strerror(rc),
                rc);
  q.phase = Qp::kConnected;
  ++connected_;
  return {};
}

Status Setup::on_request(rdma_cm_event* e) {
  rdma::CmId child(e->id);  // ours now: accepted below, or rejected and destroyed
  RdmaHello h{};
  if (e->param.conn.private_data && e->param.conn.private_data_len >= sizeof h)
    std::memcpy(&h, e->param.conn.private_data, sizeof h);
  bool ok = h.magic == kRdmaHelloMagic && h.rank > o_.rank && h.rank < o_.size && is_rdma(h.rank) &&
            h.qps == o_.qps && h.qp >= 0 && h.qp < o_.qps;
  // A retried request replaces an earlier attempt that never got established.
  if (ok && s_.pair(h.rank, h.qp) != nullptr) {
    Qp* old = s_.pair(h.rank, h.qp);
    if (old->phase == Qp::kAccepting)
      drop_later(old);
    else
      ok = false;
  }
  if (!ok) {
    rdma_reject(child.get(), nullptr, 0);
    return fail(me_ + ": unexpected RDMA connection request (rank " + std::to_string(h.rank) +
                ", qp " + std::to_string(h.qp) + " of " + std::to_string(h.qps) +
                "; this rank expects RDMA from rank(s) above it with " + std::to_string(o_.qps) +
                " QPs each): rejected");
  }
  auto qp = std::make_unique<Qp>();
  qp->peer = h.rank;
  qp->index = h.qp;
  qp->src = peer(h.rank).src;
  qp->phase = Qp::kAccepting;
  qp->id = std::move(child);
  qp->id->context = qp.get();
  Qp& q = *qp;
  s_.pair(h.rank, h.qp) = qp.get();
  s_.qps.push_back(std::move(qp));
  Status made = make_qp(q);
  rdma_conn_param p{};
  p.retry_count = static_cast<uint8_t>(o_.ib_retry_cnt);
  p.rnr_retry_count = rdma::kRnrRetryForever;
  if (made && rdma_accept(q.id.get(), &p) != 0) made = sys_fail(what(q) + ": rdma_accept");
  if (!made) {  // the requester retries (retry_later on its side)
    last_soft_ = made.error().message;
    rdma_reject(q.id.get(), nullptr, 0);
    drop_later(&q);
  }
  return {};
}

Status Setup::on_event(bool& got) {
  rdma_cm_event* raw = nullptr;
  got = false;
  if (rdma_get_cm_event(s_.channel.get(), &raw) != 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return {};
    return sys_fail(me_ + ": rdma_get_cm_event");
  }
  got = true;
  rdma::CmEvent e(raw);
  if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) return on_request(raw);
  auto* q = static_cast<Qp*>(e->id->context);
  if (q == nullptr)  // a listener's own event
    return fail(me_ + ": RDMA listener: " + event_text(raw));
  switch (e->event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (q->phase != Qp::kResolvingAddr) break;
      if (!q->id->verbs) return fail(no_device(q->src, "rdma_resolve_addr", ENODEV), ENODEV);
      if (rdma_resolve_route(q->id.get(), poll_ms_left(deadline_, 5000) + 1) != 0)
        return sys_fail(what(*q) + ": rdma_resolve_route");
      q->phase = Qp::kResolvingRoute;
      return {};
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      if (q->phase != Qp::kResolvingRoute) break;
      TB_TRY(make_qp(*q));
      RdmaHello h{kRdmaHelloMagic, o_.rank, q->index, o_.qps};
      rdma_conn_param p{};
      p.private_data = &h;
      p.private_data_len = sizeof h;
      p.retry_count = static_cast<uint8_t>(o_.ib_retry_cnt);
      p.rnr_retry_count = rdma::kRnrRetryForever;
      if (rdma_connect(q->id.get(), &p) != 0) return sys_fail(what(*q) + ": rdma_connect");
      q->phase = Qp::kConnecting;
      return {};
    }
    case RDMA_CM_EVENT_ESTABLISHED:
      if (q->phase != Qp::kConnecting && q->phase != Qp::kAccepting) break;
      return on_established(*q);
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return {};
    default:
      break;
  }
  const bool setting_up = q->phase != Qp::kConnected;
  const bool refused =
      e->event == RDMA_CM_EVENT_UNREACHABLE || e->event == RDMA_CM_EVENT_REJECTED ||
      e->event == RDMA_CM_EVENT_CONNECT_ERROR || e->event == RDMA_CM_EVENT_ROUTE_ERROR;
  if (setting_up && q->phase == Qp::kAccepting &&
      (refused || e->event == RDMA_CM_EVENT_DISCONNECTED)) {
    drop_later(q);  // the requester gave up on this attempt; its retry comes as a new request
    return {};
  }
  if (setting_up && q->peer < o_.rank && refused)
    return retry_later(q, what(*q) + ": " + event_text(raw));
  if (e->event == RDMA_CM_EVENT_ADDR_ERROR)
    return fail(what(*q) + ": " + event_text(raw) + ": no RDMA device holds " + q->src +
                " or nothing routes to " + q->dst);
  if (e->event == RDMA_CM_EVENT_DISCONNECTED)
    return fail(what(*q) + ": " + event_text(raw) + ": rank " + std::to_string(q->peer) +
                " disconnected (it exited or failed)");
  return fail(what(*q) + ": " + event_text(raw));
}

std::string Setup::pending() const {
  static const char* kPhase[] = {"resolving the address", "resolving the route",
                                 "waiting for the peer to accept", "waiting to be established",
                                 "connected"};
  std::string s;
  auto add = [&](const std::string& x) { s += (s.empty() ? "" : "; ") + x; };
  if (!need_port_.empty())
    add("no RDMA listener published yet by rank(s) " + join_ints(need_port_) +
        " (did every rank start?)");
  for (const auto& q : s_.qps)
    if (q->phase != Qp::kConnected) add(what(*q) + ": " + kPhase[q->phase]);
  std::vector<int> silent;  // higher RDMA peers with a QP that never asked to connect
  for (int j = o_.rank + 1; j < o_.size; ++j) {
    bool missing = false;
    for (int q = 0; q < o_.qps && is_rdma(j); ++q)
      missing = missing || s_.by_pair[static_cast<size_t>(j * o_.qps + q)] == nullptr;
    if (missing) silent.push_back(j);
  }
  if (!silent.empty())
    add("no connection request yet from rank(s) " + join_ints(silent) + " (did every rank start?)");
  return s;
}

Status Setup::run(const std::function<Status()>& between) {
  errno = 0;
  s_.channel.reset(rdma_create_event_channel());
  if (!s_.channel) {
    const int e = errno ? errno : ENODEV;
    std::string src;
    for (int j = 0; j < o_.size && src.empty(); ++j)
      if (is_rdma(j)) src = peer(j).src;
    return fail(no_device(src, "rdma_create_event_channel", e) +
                    " (no /dev/infiniband/rdma_cm: is rdma_ucm loaded and an rxe device made?)",
                e);
  }
  TB_TRY(set_nonblocking(s_.channel->fd, me_ + ": rdma_cm event channel"));
  s_.by_pair.assign(static_cast<size_t>(o_.size * o_.qps), nullptr);
  TB_TRY(listen());
  deadline_ = Clock::now() + o_.timeout;
  for (int j = 0; j < o_.size; ++j) {
    if (!is_rdma(j)) continue;
    expected_ += o_.qps;
    if (j < o_.rank) need_port_.push_back(j);
  }
  while (connected_ < expected_) {
    if (!need_port_.empty()) TB_TRY(try_ports());
    for (size_t i = 0; i < retries_.size();) {
      if (retries_[i].at > Clock::now()) {
        ++i;
        continue;
      }
      const Retry r = retries_[i];
      retries_.erase(retries_.begin() + static_cast<std::ptrdiff_t>(i));
      TB_TRY(connect_one(r.j, r.q));
    }
    pollfd pfd{s_.channel->fd, POLLIN, 0};
    // While listeners are still to be published or retries wait, look again every 10 ms.
    const int wait = poll_ms_left(deadline_, need_port_.empty() && retries_.empty() ? 1000 : 10);
    const int ready = ::poll(&pfd, 1, wait);
    if (ready < 0 && errno != EINTR) return sys_fail(me_ + ": poll on the rdma_cm channel");
    // Take every queued event (the fd is non-blocking); a dropped attempt goes once its event
    // is acked (rdma_destroy_id waits for that).
    for (bool got = ready > 0; got;) {
      TB_TRY(on_event(got));
      drop_now();
    }
    if (connected_ < expected_ && Clock::now() >= deadline_)
      return fail(me_ + ": RDMA set-up timed out after " + std::to_string(o_.timeout.count()) +
                  " ms: " + pending() +
                  (last_soft_.empty() ? "" : "; last retried failure: " + last_soft_));
  }
  if (between) TB_TRY(between());
  return {};
}

}  // namespace

Status rdma_setup(RdmaComm::State& s, const FileStore& store,
                  const std::function<Status()>& between) {
  return Setup(s, store).run(between);
}

}  // namespace tb::collective
