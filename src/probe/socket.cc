#include "probe/socket.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include <ctime>

namespace tb::probe {

int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

Result<sockaddr_in> ipv4_endpoint(const std::string& addr, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1)
    return bad_input("\"" + addr + "\" is not an IPv4 address");
  return sa;
}

Status set_dscp(int fd, int dscp) {
  if (dscp < 0 || dscp > 63) return bad_input("DSCP " + std::to_string(dscp) + " is outside 0..63");
  const int tos = dscp << 2;
  if (::setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos) != 0)
    return sys_fail("setsockopt IP_TOS " + std::to_string(tos));
  return {};
}

Result<UniqueFd> open_socket(int type, const std::string& dev) {
  UniqueFd fd(::socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return sys_fail("open socket");
  if (!dev.empty() &&
      ::setsockopt(fd.get(), SOL_SOCKET, SO_BINDTODEVICE, dev.c_str(), dev.size()) != 0)
    return sys_fail("bind socket to device " + dev);
  return fd;
}

Result<int> set_buffer(int fd, int which, uint64_t bytes) {
  const int v = bytes > INT32_MAX / 2 ? INT32_MAX / 2 : static_cast<int>(bytes);
  const int force = which == SO_SNDBUF ? SO_SNDBUFFORCE : SO_RCVBUFFORCE;
  if (::setsockopt(fd, SOL_SOCKET, force, &v, sizeof v) != 0 &&
      ::setsockopt(fd, SOL_SOCKET, which, &v, sizeof v) != 0)
    return sys_fail(std::string("set ") + (which == SO_SNDBUF ? "SO_SNDBUF" : "SO_RCVBUF") +
                    " to " + std::to_string(v));
  return get_buffer(fd, which);
}

int get_buffer(int fd, int which) {
  int v = 0;
  socklen_t len = sizeof v;
  ::getsockopt(fd, SOL_SOCKET, which, &v, &len);
  return v;
}

Status send_all(int fd, std::span<const uint8_t> data, int64_t deadline_ns,
                const std::string& what) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return sys_fail(what);
    if (wait_fd(fd, POLLOUT, deadline_ns) == 0) return fail(what + ": timed out");
  }
  return {};
}

int wait_fd(int fd, short events, int64_t deadline_ns) {
  for (;;) {
    const int64_t left = deadline_ns - now_ns();
    if (left <= 0) return 0;
    pollfd p{fd, events, 0};
    timespec ts{left / 1'000'000'000, left % 1'000'000'000};
    const int r = ::ppoll(&p, 1, &ts, nullptr);
    if (r > 0) return p.revents;
    if (r == 0 || errno != EINTR) return 0;
  }
}

Status connect_by(int fd, const sockaddr_in& to, const std::string& what, int64_t deadline_ns) {
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0) return {};
  if (errno != EINPROGRESS) return sys_fail("connect to " + what);
  if (wait_fd(fd, POLLOUT, deadline_ns) == 0)
    return fail("connect to " + what + ": no answer before the deadline", ETIMEDOUT);
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return sys_fail("connect to " + what, err);
  return {};
}

}  // namespace tb::probe
