#include "multihost/wire.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace tb::multihost {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

sockaddr_in sockaddr_of(Ipv4 addr, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = addr.network_order();
  return sa;
}

std::string where(Ipv4 addr, int port) {
  return addr.to_string() + ":" + std::to_string(port);
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) |
                       (uint32_t(uint8_t(bytes[i + 1])) << 8) | uint8_t(bytes[i + 2]);
    for (int k = 3; k >= 0; --k) out += kAlphabet[(v >> (6 * k)) & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0)
    return fail("base64: length " + std::to_string(text.size()) + " is not a multiple of 4");
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0 || (v[k] = value(c)) < 0)
        return fail("base64: bad character at " + std::to_string(i + k));
    }
    const uint32_t w =
        (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
    out += char((w >> 16) & 0xff);
    if (pad < 2) out += char((w >> 8) & 0xff);
    if (pad < 1) out += char(w & 0xff);
  }
  return out;
}

void tune_socket(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  int idle = kKeepIdleS, intvl = kKeepIntvlS, cnt = kSilentMs / 1000 / kKeepIntvlS;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  // tcp(7): with keepalive on, it also bounds how long probes may go unanswered.
  unsigned int user_timeout = kSilentMs;
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
}

void Conn::end(const std::string& why) {
  if (!closed_) {
    closed_ = true;
    closed_why_ = why;
  }
  if (fd_) ::shutdown(fd_.get(), SHUT_RDWR);
}

Status Conn::send_line(const std::string& line, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::send(fd_.get(), line.data() + done, line.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      const int e = errno;
      end(std::string("send failed: ") + std::strerror(e));
      errno = e;
      return sys_fail("send to " + peer_);
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      // Part of the line may be on the wire: nothing may follow it, the connection ends.
      const std::string why = "it took " + std::to_string(done) + " of " +
                              std::to_string(line.size()) + " bytes of a message in " +
                              std::to_string(limit.count()) + " ms";
      end(why);
      return fail("send to " + peer_ + ": " + why + "; the connection is ended");
    }
    pollfd p{fd_.get(), POLLOUT, 0};
    ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));
  }
  return {};
}

Status Conn::send(const nlohmann::json& msg, std::chrono::milliseconds limit) {
  if (closed_) return fail("send to " + peer_ + ": the connection is closed");
  const std::string text = msg.dump();
  if (text.size() <= kMaxPiece) return send_line(text + "\n", limit);
  if (text.size() > kMaxMessage)
    return fail("send to " + peer_ + ": a message of " + std::to_string(text.size()) +
                " bytes (at most " + std::to_string(kMaxMessage) + ")");
  const size_t of = (text.size() + kMaxPiece - 1) / kMaxPiece;
  for (size_t n = 0; n < of; ++n) {
    const nlohmann::json piece = {
        {"piece", {{"n", n}, {"of", of}, {"text", text.substr(n * kMaxPiece, kMaxPiece)}}}};
    TB_TRY(send_line(piece.dump() + "\n", limit));
  }
  return {};
}

Status Conn::take(nlohmann::json j, std::vector<nlohmann::json>& out) {
  if (!j.contains("piece")) {
    out.push_back(std::move(j));
    return {};
  }
  const auto& p = j["piece"];
  const size_t n = p.value("n", size_t{0}), of = p.value("of", size_t{0});
  const auto* text = p.contains("text") && p["text"].is_string()
                         ? p["text"].get_ptr<const std::string*>()
                         : nullptr;
  if (!text || n != piece_next_ || n >= of || pieces_.size() + text->size() > kMaxMessage)
    return fail("receive from " + peer_ + ": a piece out of order or too long");
  pieces_ += *text;
  if (++piece_next_ < of) return {};
  auto whole = nlohmann::json::parse(pieces_, nullptr, false);
  pieces_.clear();
  piece_next_ = 0;
  if (whole.is_discarded() || !whole.is_object())
    return fail("receive from " + peer_ + ": pieces that are not a JSON object");
  out.push_back(std::move(whole));
  return {};
}

Status Conn::receive(std::vector<nlohmann::json>& out, int wait_ms) {
  if (closed_) return {};
  if (wait_ms > 0) {
    pollfd p{fd_.get(), POLLIN, 0};
    ::poll(&p, 1, wait_ms);
  }
  char buf[65536];
  for (int reads = 0; reads < 256; ++reads) {  // bounded: at most 16 MiB per call
    const ssize_t n = ::recv(fd_.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      in_.append(buf, static_cast<size_t>(n));
      if (in_.size() > kMaxLine && in_.find('\n') == std::string::npos)
        return fail("receive from " + peer_ + ": a line longer than " + std::to_string(kMaxLine) +
                    " bytes");
      continue;
    }
    if (n == 0) {
      closed_ = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    // A reset, or the kernel gave up on a silent peer: the lines already read still count.
    end(errno == ETIMEDOUT ? "no answer from it for " + std::to_string(kSilentMs / 1000) +
                                 " s (its machine down, or the underlay between cut)"
                           : std::string(std::strerror(errno)));
    break;
  }
  size_t start = 0;
  for (size_t nl; (nl = in_.find('\n', start)) != std::string::npos; start = nl + 1) {
    auto j = nlohmann::json::parse(in_.begin() + static_cast<std::ptrdiff_t>(start),
                                   in_.begin() + static_cast<std::ptrdiff_t>(nl), nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return fail("receive from " + peer_ + ": a line that is not a JSON object");
    TB_TRY(take(std::move(j), out));
  }
  in_.erase(0, start);
  return {};
}

Result<Conn> connect_to(Ipv4 addr, int port, std::chrono::steady_clock::time_point deadline,
                        const std::atomic<bool>& stop) {
  const sockaddr_in sa = sockaddr_of(addr, port);
  int last = 0;
  for (int tries = 0; tries < 100000; ++tries) {
    if (stop.load()) return fail("connect to " + where(addr, port) + ": interrupted");
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) return sys_fail("socket");
    int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left.count(), 1, 1000))) == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      tune_socket(fd.get());
      return Conn(std::move(fd), where(addr, port));
    }
    last = errno;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return std::unexpected(
      Error{"connect to " + where(addr, port) + ": " + std::strerror(last), last, kExitBadInput});
}

Result<Listener> Listener::open(Ipv4 addr, int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return sys_fail("socket");
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const sockaddr_in sa = sockaddr_of(addr, port);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(fd.get(), 64) != 0) {
    const int e = errno;
    return std::unexpected(Error{"listen on " + where(addr, port) + ": " + std::strerror(e) +
                                     (e == EADDRINUSE      ? " (another run of this lab, or pick "
                                                             "another --rendezvous-port on every host)"
                                      : e == EADDRNOTAVAIL ? " (not this host's underlay address)"
                                                           : ""),
                                 e, kExitBadInput});
  }
  return Listener(std::move(fd));
}

Result<std::optional<Conn>> Listener::accept(int wait_ms) {
  pollfd p{fd_.get(), POLLIN, 0};
  if (::poll(&p, 1, wait_ms) <= 0) return std::optional<Conn>{};
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  UniqueFd fd(
      ::accept4(fd_.get(), reinterpret_cast<sockaddr*>(&sa), &len, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!fd) {
    if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) return std::optional<Conn>{};
    return sys_fail("accept");
  }
  tune_socket(fd.get());
  return std::optional<Conn>(
      Conn(std::move(fd), where(Ipv4{ntohl(sa.sin_addr.s_addr)}, ntohs(sa.sin_port))));
}

}  // namespace tb::multihost
