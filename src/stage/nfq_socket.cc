// NfqSocket (nfq_socket.h).
#include "stage/nfq_socket.h"

#include <linux/netlink.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include "core/clock.h"

namespace tb::stage {

Result<NfqSocket> NfqSocket::open(int rcvbuf_bytes) {
  UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_NETFILTER));
  if (!fd) return sys_fail("open NETLINK_NETFILTER socket");
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&local), sizeof local) != 0)
    return sys_fail("bind NETLINK_NETFILTER socket");
  // SO_RCVBUFFORCE passes net.core.rmem_max (needs CAP_NET_ADMIN); fall back to what is allowed.
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf_bytes, sizeof rcvbuf_bytes) != 0)
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf_bytes, sizeof rcvbuf_bytes);
  int one = 1;
  if (::setsockopt(fd.get(), SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one) != 0)
    return sys_fail("set NETLINK_NO_ENOBUFS on the NFQUEUE socket");
  return NfqSocket(std::move(fd));
}

Status NfqSocket::send(const NlBuffer& buf) {
  if (buf.empty()) return {};
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  for (int attempt = 0; attempt < 100; ++attempt) {
    ssize_t n = ::sendto(fd_.get(), buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&kernel),
                         sizeof kernel);
    if (n == static_cast<ssize_t>(buf.size())) return {};
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == ENOBUFS)) {  // kernel side busy: a short wait
      pollfd p{fd_.get(), POLLOUT, 0};
      ::poll(&p, 1, 10);
      continue;
    }
    if (n < 0) return sys_fail("send to nfnetlink_queue");
    return fail("send to nfnetlink_queue: short write");
  }
  return fail("send to nfnetlink_queue: socket stayed busy for 1 s");
}

Result<std::span<const char>> NfqSocket::receive_nowait() {
  for (;;) {
    ssize_t n = ::recv(fd_.get(), rx_.data(), rx_.size(), MSG_DONTWAIT);
    if (n >= 0) return std::span<const char>(rx_.data(), static_cast<size_t>(n));
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::span<const char>();
    // With NETLINK_NO_ENOBUFS an overrun is not reported; anything else is real.
    return sys_fail("receive from nfnetlink_queue");
  }
}

Status NfqSocket::request(const NlBuffer& buf, uint32_t seq, const std::string& what,
                          Duration timeout, const std::function<void(const NlEvent&)>& other) {
  if (auto s = send(buf); !s) return std::unexpected(with_context(s.error(), what));
  const int64_t deadline = monotonic_ns() + timeout.ns;
  std::vector<NlEvent> events;
  for (;;) {
    auto data = receive_nowait();
    if (!data) return std::unexpected(with_context(data.error(), what));
    if (data->empty()) {
      int64_t left = deadline - monotonic_ns();
      if (left <= 0)
        return fail(what + ": no answer from the kernel within " + format_duration(timeout));
      pollfd p{fd_.get(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left / 1'000'000) + 1);
      continue;
    }
    events.clear();
    parse_events(*data, events);
    bool answered = false;
    int error = 0;
    for (const auto& e : events) {
      if (e.kind == NlEvent::Kind::kAck && e.seq == seq) {
        answered = true;
        error = e.error;
      } else if (other) {
        other(e);
      }
    }
    if (answered) {
      if (error != 0) return sys_fail(what, error);
      return {};
    }
  }
}

}  // namespace tb::stage
