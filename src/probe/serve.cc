#include "probe/serve.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "probe/packet.h"
#include "probe/socket.h"

namespace tb::probe {
namespace {

// Sink connections served at once: one per stream of a 16 -> 1 incast and more (bench-congestion
// ran 16; a connection beyond it is closed at once and said so in an event).
constexpr size_t kMaxConns = 64;
constexpr int kReadsPerWake = 16;  // keep the echo responsive while a sink is busy

// One sink connection: hello, then payload counted until EOF, then the report.
struct Sink {
  UniqueFd fd;
  std::array<uint8_t, kHelloBytes> hello{};
  size_t hello_got = 0;
  int64_t warmup_ns = 0;
  int64_t first_ns = -1, mark_ns = -1, last_ns = 0;
  uint64_t bytes = 0, mark_bytes = 0;
  bool done = false;
};

GoodputReport report_of(const Sink& s) {
  GoodputReport r;
  r.bytes = s.bytes;
  r.ns = s.first_ns < 0 ? 0 : static_cast<uint64_t>(s.last_ns - s.first_ns);
  if (s.mark_ns >= 0 && s.last_ns > s.mark_ns) {
    r.measured_bytes = s.bytes - s.mark_bytes;
    r.measured_ns = static_cast<uint64_t>(s.last_ns - s.mark_ns);
  }
  return r;
}

// Reads what is there; false when the connection is finished (EOF answered, or broken).
bool pump(Sink& s, ServeStats& stats) {
  static std::vector<uint8_t> buf(256 * 1024);
  for (int i = 0; i < kReadsPerWake; ++i) {
    if (s.hello_got < kHelloBytes) {
      const ssize_t n =
          ::recv(s.fd.get(), s.hello.data() + s.hello_got, kHelloBytes - s.hello_got, MSG_DONTWAIT);
      if (n == 0) return false;
      if (n < 0) return errno == EAGAIN || errno == EINTR;
      s.hello_got += static_cast<size_t>(n);
      if (s.hello_got < kHelloBytes) continue;
      auto h = decode_hello(s.hello);
      if (!h) return false;  // not a tb-probe sender
      s.warmup_ns = int64_t{h->warmup_ms} * 1'000'000;
      continue;
    }
    const ssize_t n = ::recv(s.fd.get(), buf.data(), buf.size(), MSG_DONTWAIT);
    const int64_t t = now_ns();
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (n == 0) {
      // The sender half-closed: answer with what we counted. The report is 40 bytes into an
      // empty send buffer, so it goes out at once; give it a second in any case.
      const auto rep = encode(report_of(s));
      size_t off = 0;
      const int64_t deadline = t + 1'000'000'000;
      while (off < rep.size()) {
        const ssize_t w = ::send(s.fd.get(), rep.data() + off, rep.size() - off, MSG_NOSIGNAL);
        if (w > 0)
          off += static_cast<size_t>(w);
        else if (w < 0 && errno != EAGAIN && errno != EINTR)
          break;
        else if (wait_fd(s.fd.get(), POLLOUT, deadline) == 0)
          break;
      }
      return false;
    }
    if (s.first_ns < 0) s.first_ns = t;
    s.bytes += static_cast<uint64_t>(n);
    stats.tcp_bytes += static_cast<uint64_t>(n);
    s.last_ns = t;
    if (s.mark_ns < 0 && t - s.first_ns >= s.warmup_ns) {
      s.mark_ns = t;
      s.mark_bytes = s.bytes;
    }
  }
  return true;
}

// Echoes datagrams back from the address they were sent to, out of the interface they came
// in on (IP_PKTINFO both ways): without it a reply to a probe for a secondary address (a
// loopback or bridge address) would leave with the outgoing interface's address as source,
// and the prober's connected socket would drop it.
void echo(int fd, ServeStats& stats) {
  uint8_t buf[2048];
  alignas(cmsghdr) uint8_t ctl[CMSG_SPACE(sizeof(in_pktinfo))];
  for (int i = 0; i < 64; ++i) {
    sockaddr_in from{};
    iovec iov{buf, sizeof buf};
    msghdr m{};
    m.msg_name = &from;
    m.msg_namelen = sizeof from;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    const ssize_t n = ::recvmsg(fd, &m, MSG_DONTWAIT);
    if (n < 0) return;
    in_pktinfo info{};
    bool have_info = false;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
        std::memcpy(&info, CMSG_DATA(c), sizeof info);
        have_info = true;
      }
    iov.iov_len = static_cast<size_t>(n);
    m.msg_flags = 0;
    if (have_info) {
      in_pktinfo out{};
      out.ipi_ifindex = info.ipi_ifindex;
      out.ipi_spec_dst = info.ipi_addr;
      m.msg_controllen = CMSG_SPACE(sizeof out);
      cmsghdr* c = CMSG_FIRSTHDR(&m);
      c->cmsg_level = IPPROTO_IP;
      c->cmsg_type = IP_PKTINFO;
      c->cmsg_len = CMSG_LEN(sizeof out);
      std::memcpy(CMSG_DATA(c), &out, sizeof out);
    } else {
      m.msg_control = nullptr;
      m.msg_controllen = 0;
    }
    if (::sendmsg(fd, &m, MSG_DONTWAIT) == n) ++stats.echoed;
  }
}

}  // namespace

Status validate(const ServeOptions& o) {
  if (o.port == 0) return bad_input("serve needs --port");
  if (o.seconds < 1 || o.seconds > kMaxServeSeconds)
    return bad_input("--seconds " + std::to_string(o.seconds) + ": must be 1.." +
                     std::to_string(kMaxServeSeconds));
  if (o.buffer > (uint64_t{1} << 30)) return bad_input("--buffer: at most 1 GiB");
  return {};
}

Result<ServeStats> serve(const ServeOptions& o, const std::atomic<bool>& stop,
                         const std::function<void(const nlohmann::json&)>& emit) {
  TB_TRY(validate(o));
  auto at = ipv4_endpoint(o.addr, o.port);
  if (!at) return std::unexpected(at.error());
  const std::string where =
      o.addr + ":" + std::to_string(o.port) + (o.dev.empty() ? "" : " on " + o.dev);
  auto udp = open_socket(SOCK_DGRAM, o.dev);
  if (!udp) return std::unexpected(udp.error());
  TB_TRY(set_dscp(udp->get(), o.dscp));
  const int on = 1;
  if (::setsockopt(udp->get(), IPPROTO_IP, IP_PKTINFO, &on, sizeof on) != 0)
    return sys_fail("IP_PKTINFO on the UDP echo");
  if (::bind(udp->get(), reinterpret_cast<const sockaddr*>(&*at), sizeof *at) != 0)
    return sys_fail("bind UDP echo to " + where);
  auto tcp = open_socket(SOCK_STREAM, o.dev);
  if (!tcp) return std::unexpected(tcp.error());
  TB_TRY(set_dscp(tcp->get(), o.dscp));  // accepted sockets inherit it (inet_csk_clone_lock)
  const int one = 1;
  ::setsockopt(tcp->get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rcvbuf = get_buffer(tcp->get(), SO_RCVBUF);
  if (o.buffer > 0) {
    auto b = set_buffer(tcp->get(), SO_RCVBUF, o.buffer);
    if (!b) return std::unexpected(b.error());
    rcvbuf = *b;
  }
  if (::bind(tcp->get(), reinterpret_cast<const sockaddr*>(&*at), sizeof *at) != 0)
    return sys_fail("bind TCP sink to " + where);
  if (::listen(tcp->get(), 16) != 0) return sys_fail("listen on " + where);
  emit({{"event", "ready"},
        {"port", o.port},
        {"addr", o.addr},
        {"dev", o.dev},
        {"rcvbuf", rcvbuf},
        {"seconds", o.seconds}});

  ServeStats stats;
  std::vector<std::unique_ptr<Sink>> sinks;
  const int64_t deadline = now_ns() + int64_t{o.seconds} * 1'000'000'000;
  while (!stop.load() && now_ns() < deadline) {
    std::vector<pollfd> fds = {{udp->get(), POLLIN, 0}, {tcp->get(), POLLIN, 0}};
    for (const auto& s : sinks) fds.push_back({s->fd.get(), POLLIN, 0});
    const timespec tick{0, 100'000'000};  // re-check stop and the deadline every 100 ms
    if (::ppoll(fds.data(), fds.size(), &tick, nullptr) <= 0) continue;
    if (fds[0].revents) echo(udp->get(), stats);
    if (fds[1].revents) {
      UniqueFd c(::accept4(tcp->get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (c && sinks.size() < kMaxConns) {
        sinks.push_back(std::make_unique<Sink>());
        sinks.back()->fd = std::move(c);
        ++stats.tcp_sessions;
      } else if (c) {
        emit({{"event", "refused"},
              {"why", "already " + std::to_string(kMaxConns) +
                          " TCP sink connections at once; the sender sees its connection closed"}});
      }
    }
    for (size_t i = 0; i < sinks.size(); ++i)
      if (fds[2 + i].revents && !pump(*sinks[i], stats)) sinks[i]->done = true;
    std::erase_if(sinks, [](const auto& s) { return s->done; });
  }
  return stats;
}

}  // namespace tb::probe
