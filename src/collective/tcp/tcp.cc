#include "collective/tcp/tcp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace tb::collective {
namespace {

using Clock = std::chrono::steady_clock;         // CLOCK_MONOTONIC: the progress board's clock
constexpr uint32_t kTcpHelloMagic = 0x74626331;  // "tbc1"
// Receive low-water mark: poll reports a connection readable once this many bytes (or all the
// transfer still waits for, if fewer) are queued. 64 KiB keeps the kernel's receive buffer and
// window clamp as they are (tcp_set_rcvlowat grows them only for a mark over half the buffer,
// whose default is 128 KiB), so long, delayed paths keep their window.
constexpr size_t kRcvLowat = 64 * 1024;

struct TcpHello {
  uint32_t magic;
  int32_t rank;
  int32_t channel;
};

Result<sockaddr_in> endpoint(const std::string& addr, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (!addr.empty() && inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1)
    return bad_input("not an IPv4 address: '" + addr + "'");
  return sa;
}

// Moves all of buf over a blocking-with-deadline loop on a non-blocking socket.
Status io_all(int fd, void* buf, size_t len, bool sending, Clock::time_point deadline,
              const std::string& what) {
  auto* p = static_cast<char*>(buf);
  size_t done = 0;
  while (done < len) {
    const ssize_t n = sending ? ::send(fd, p + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                              : ::recv(fd, p + done, len - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return fail(what + ": connection closed by the peer");
    if (errno != EAGAIN && errno != EINTR) return sys_fail(what);
    if (Clock::now() >= deadline) return fail(what + ": timed out");
    pollfd pfd{fd, static_cast<short>(sending ? POLLOUT : POLLIN), 0};
    ::poll(&pfd, 1, poll_ms_left(deadline));
  }
  return {};
}

// SO_BINDTODEVICE: the socket's segments leave by `dev` and only segments arriving on `dev`
// match it.
Status bind_device(int fd, const std::string& dev, const std::string& what) {
  if (::setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev.c_str(),
                   static_cast<socklen_t>(dev.size())) != 0)
    return sys_fail(what + ": bind to interface " + dev);
  return {};
}

void tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

TcpComm::TcpComm(const TcpOptions& o)
    : Comm(o.rank, o.size),
      channels_(o.channels),
      timeout_(o.timeout),
      peers_(o.peers),
      use_(o.use.empty() ? std::vector<char>(static_cast<size_t>(o.size), 1) : o.use),
      conns_(static_cast<size_t>(o.size * o.channels)),
      lowat_(static_cast<size_t>(o.size * o.channels), 1),
      interrupt_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

TcpComm::~TcpComm() = default;

Result<std::unique_ptr<TcpComm>> TcpComm::connect(const FileStore& store, const TcpOptions& o) {
  TB_CHECK(o.channels >= 1 && o.size >= 1 && o.rank >= 0 && o.rank < o.size);
  TB_CHECK(static_cast<int>(o.peers.size()) == o.size);
  TB_CHECK(o.use.empty() || static_cast<int>(o.use.size()) == o.size);
  std::unique_ptr<TcpComm> c(new TcpComm(o));
  const auto deadline = Clock::now() + o.timeout;
  const std::string me = "rank " + std::to_string(o.rank);
  if (!c->interrupt_) return sys_fail(me + ": eventfd");
  auto board = ProgressBoard::open(store.dir() + "/" + o.key_prefix + "progress", o.rank, o.size);
  if (!board) return std::unexpected(with_context(board.error(), me));
  c->board_ = std::move(*board);

  // One listener for unbound connections, one per interface that channels are bound to (a
  // connection bound to raila is accepted on raila, so its SYN-ACK leaves by raila too).
  std::vector<std::string> devs{""};
  for (int j = 0; j < o.size; ++j)
    if (j != o.rank && c->uses(j))
      for (const auto& d : o.peers[static_cast<size_t>(j)].ports)
        if (std::find(devs.begin(), devs.end(), d) == devs.end()) devs.push_back(d);
  std::vector<UniqueFd> lsts;
  for (const auto& dev : devs) {
    UniqueFd lst(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!lst) return sys_fail(me + ": socket");
    if (!dev.empty()) TB_TRY(bind_device(lst.get(), dev, me + ": listen"));
    auto any = endpoint("", 0);
    if (::bind(lst.get(), reinterpret_cast<sockaddr*>(&*any), sizeof *any) != 0 ||
        ::listen(lst.get(), o.size * o.channels + 16) != 0)
      return sys_fail(me + ": listen" + (dev.empty() ? "" : " on " + dev));
    sockaddr_in bound{};
    socklen_t bl = sizeof bound;
    ::getsockname(lst.get(), reinterpret_cast<sockaddr*>(&bound), &bl);
    TB_TRY(
        store.set(o.key_prefix + "port." + std::to_string(o.rank) + (dev.empty() ? "" : "." + dev),
                  std::to_string(ntohs(bound.sin_port))));
    lsts.push_back(std::move(lst));
  }

  // Connect to every lower (masked) rank, from this rank's address on the pair's tier.
  for (int j = 0; j < o.rank; ++j) {
    if (!c->uses(j)) continue;
    const TcpPeer& p = o.peers[static_cast<size_t>(j)];
    auto from = endpoint(p.src, 0);
    if (!from) return bad_input(me + ": bad address for rank " + std::to_string(j));
    for (int ch = 0; ch < o.channels; ++ch) {
      const std::string dev =
          p.ports.empty() ? "" : p.ports[static_cast<size_t>(ch) % p.ports.size()];
      const std::string key =
          o.key_prefix + "port." + std::to_string(j) + (dev.empty() ? "" : "." + dev);
      auto port = store.get(
          key, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
      if (!port) return std::unexpected(with_context(port.error(), me));
      auto to = endpoint(p.dst, static_cast<uint16_t>(std::stoi(*port)));
      if (!to) return bad_input(me + ": bad address for rank " + std::to_string(j));
      const std::string what = me + ": connect " + p.src + " -> rank " + std::to_string(j) +
                               " at " + p.dst + ":" + *port + " (" + p.tier + ", channel " +
                               std::to_string(ch) + (dev.empty() ? "" : ", port " + dev) + ")";
      UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      if (!fd) return sys_fail(what);
      if (!dev.empty()) TB_TRY(bind_device(fd.get(), dev, what));
      if (!p.src.empty() &&
          ::bind(fd.get(), reinterpret_cast<sockaddr*>(&*from), sizeof *from) != 0)
        return sys_fail(what + ": bind source");
      tune(fd.get());
      if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&*to), sizeof *to) != 0 &&
          errno != EINPROGRESS)
        return sys_fail(what);
      pollfd pfd{fd.get(), POLLOUT, 0};
      while (::poll(&pfd, 1, poll_ms_left(deadline)) == 0)
        if (Clock::now() >= deadline) return fail(what + ": timed out");
      int err = 0;
      socklen_t el = sizeof err;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &el);
      if (err != 0) return sys_fail(what, err);
      TcpHello h{kTcpHelloMagic, o.rank, ch};
      TB_TRY(io_all(fd.get(), &h, sizeof h, true, deadline, what + ": hello"));
      c->conn(j, ch) = std::move(fd);
    }
  }
  // Accept from every higher (masked) rank.
  int want = 0;
  for (int j = o.rank + 1; j < o.size; ++j)
    if (c->uses(j)) want += o.channels;
  while (want > 0) {
    std::vector<pollfd> pfds;
    for (const auto& l : lsts) pfds.push_back({l.get(), POLLIN, 0});
    if (::poll(pfds.data(), pfds.size(), poll_ms_left(deadline)) == 0) {
      if (Clock::now() < deadline) continue;
      return fail(me + ": timed out waiting for " + std::to_string(want) +
                  " connection(s) from higher ranks (did every rank start?)");
    }
    size_t which = 0;
    while (which < pfds.size() && !(pfds[which].revents & POLLIN)) ++which;
    if (which == pfds.size()) continue;
    UniqueFd fd(::accept4(lsts[which].get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return sys_fail(me + ": accept");
    }
    tune(fd.get());
    TcpHello h{};
    TB_TRY(io_all(fd.get(), &h, sizeof h, false, deadline, me + ": read hello"));
    if (h.magic != kTcpHelloMagic || h.rank <= o.rank || h.rank >= o.size || !c->uses(h.rank) ||
        h.channel < 0 || h.channel >= o.channels || c->conn(h.rank, h.channel))
      return fail(me + ": unexpected hello (rank " + std::to_string(h.rank) + ", channel " +
                  std::to_string(h.channel) + ")");
    // A bound channel must have come in on the listener of its port: both ends agree on it.
    const auto& ports = o.peers[static_cast<size_t>(h.rank)].ports;
    const std::string want_dev =
        ports.empty() ? "" : ports[static_cast<size_t>(h.channel) % ports.size()];
    if (want_dev != devs[which])
      return fail(
          me + ": rank " + std::to_string(h.rank) + "'s channel " + std::to_string(h.channel) +
          " came in on " +
          (devs[which].empty() ? std::string("the unbound listener") : "port " + devs[which]) +
          ", expected " + (want_dev.empty() ? std::string("unbound") : "port " + want_dev) +
          " (both ends must give the pair the same ports)");
    c->conn(h.rank, h.channel) = std::move(fd);
    --want;
  }
  return c;
}

Status TcpComm::do_exchange(std::span<const Xfer> xfers) {
  // One queue of stripes per (connection, direction), served in order.
  struct Stripe {
    char* p;
    size_t len, done;
    const Xfer* x;
  };
  struct Dir {
    std::vector<Stripe> q;
    size_t head = 0;
  };
  struct Conn {
    int peer, ch;
    Dir out, in;
  };
  std::vector<Conn> conns;
  auto slot = [&](int peer, int ch) -> Conn& {
    for (auto& c : conns)
      if (c.peer == peer && c.ch == ch) return c;
    conns.push_back(Conn{peer, ch, {}, {}});
    return conns.back();
  };
  for (const auto& x : xfers) {
    TB_CHECK(uses(x.peer));  // the caller routes masked-out peers elsewhere
    const size_t n = std::clamp<size_t>(x.len / kMinStripe, 1, static_cast<size_t>(channels_));
    for (size_t s = 0; s < n; ++s) {
      const size_t lo = x.len * s / n, hi = x.len * (s + 1) / n;
      Conn& c = slot(x.peer, static_cast<int>(s));
      (x.kind == Xfer::kSend ? c.out : c.in)
          .q.push_back(Stripe{static_cast<char*>(x.buf) + lo, hi - lo, 0, &x});
    }
  }
  auto idle_deadline = Clock::now() + timeout_;
  board_->note(mono_ns(idle_deadline - timeout_));  // starting a step is progress too
  std::vector<pollfd> pfds;
  for (;;) {
    pfds.clear();
    for (auto& c : conns) {
      short ev = 0;
      if (c.out.head < c.out.q.size()) ev |= POLLOUT;
      if (c.in.head < c.in.q.size()) {
        ev |= POLLIN;
        const Stripe& st = c.in.q[c.in.head];
        const int want = static_cast<int>(std::min(kRcvLowat, st.len - st.done));
        int& have = lowat_[static_cast<size_t>(c.peer * channels_ + c.ch)];
        if (want != have && ::setsockopt(conn(c.peer, c.ch).get(), SOL_SOCKET, SO_RCVLOWAT, &want,
                                         sizeof want) == 0)
          have = want;
      }
      pfds.push_back(pollfd{ev ? conn(c.peer, c.ch).get() : -1, ev, 0});
    }
    if (std::all_of(pfds.begin(), pfds.end(), [](const pollfd& p) { return p.fd < 0; })) return {};
    pfds.push_back(pollfd{interrupt_.get(), POLLIN, 0});  // after the connections' entries
    const int ready = ::poll(pfds.data(), pfds.size(), poll_ms_left(idle_deadline));
    if (ready < 0 && errno != EINTR) return sys_fail("rank " + std::to_string(rank()) + ": poll");
    if (ready > 0 && (pfds.back().revents & POLLIN))
      return fail("rank " + std::to_string(rank()) +
                  ": TCP transfers interrupted (the communicator's other transport failed)");
    bool moved = false;
    for (size_t i = 0; i < conns.size() && ready > 0; ++i) {
      if (pfds[i].fd < 0 || pfds[i].revents == 0) continue;
      Conn& c = conns[i];
      const int fd = pfds[i].fd;
      auto pump = [&](Dir& d, bool sending) -> Status {
        while (d.head < d.q.size()) {
          Stripe& s = d.q[d.head];
          const ssize_t n =
              sending ? ::send(fd, s.p + s.done, s.len - s.done, MSG_NOSIGNAL | MSG_DONTWAIT)
                      : ::recv(fd, s.p + s.done, s.len - s.done, MSG_DONTWAIT);
          if (n > 0) {
            s.done += static_cast<size_t>(n);
            moved = true;
            if (s.done == s.len) ++d.head;
            continue;
          }
          if (n < 0 && (errno == EAGAIN || errno == EINTR)) return {};
          const std::string what =
              "rank " + std::to_string(rank()) + ": " + (sending ? "sending " : "receiving ") +
              std::to_string(s.x->len) + " bytes " + (sending ? "to" : "from") + " rank " +
              std::to_string(c.peer) + " (" + peers_[static_cast<size_t>(c.peer)].tier +
              ", channel " + std::to_string(c.ch) + ")";
          if (n == 0)
            return fail(what + ": rank " + std::to_string(c.peer) +
                        " closed the connection (it exited or failed)");
          return sys_fail(what + ": rank " + std::to_string(c.peer) +
                          " dropped the connection (it exited or failed)");
        }
        return {};
      };
      if (pfds[i].revents & (POLLIN | POLLERR | POLLHUP)) TB_TRY(pump(c.in, false));
      if (pfds[i].revents & (POLLOUT | POLLERR | POLLHUP)) TB_TRY(pump(c.out, true));
    }
    if (moved) {
      const auto now = Clock::now();
      idle_deadline = now + timeout_;
      board_->note(mono_ns(now));
    } else if (Clock::now() >= idle_deadline && !wait_on(&idle_deadline)) {
      std::string waiting;
      for (auto& c : conns)
        if (c.in.head < c.in.q.size() || c.out.head < c.out.q.size())
          waiting += (waiting.empty() ? "" : ", ") + std::to_string(c.peer);
      return fail("rank " + std::to_string(rank()) + ": timed out: no progress for " +
                  std::to_string(timeout_.count()) + " ms on transfers with rank(s) " + waiting +
                  ", nor by any other rank of the communicator");
    }
  }
}

bool TcpComm::wait_on(Clock::time_point* deadline) const {
  const int64_t last = board_->latest();
  const auto last_any = Clock::time_point(std::chrono::nanoseconds(last));
  if (last_any + timeout_ <= *deadline) return false;
  *deadline = last_any + timeout_;
  return true;
}

void TcpComm::interrupt() {
  const uint64_t one = 1;
  // An eventfd write only fails when the counter would overflow; it is already readable then.
  [[maybe_unused]] const ssize_t n = ::write(interrupt_.get(), &one, sizeof one);
}

void TcpComm::abort() {
  // Closing every connection makes peers blocked on this rank fail now, not at their timeout.
  for (auto& fd : conns_)
    if (fd) {
      ::shutdown(fd.get(), SHUT_RDWR);
      fd.reset();
    }
}

}  // namespace tb::collective
