// The wire between two hosts' testbedctl for a verb that spans the hosts of a lab (issue 19):
// one TCP connection over the underlay carrying one JSON object per line, and base64 for the
// bytes of files inside those objects. Only testbedctl speaks it, so it is plain and versioned
// by the hello (session.h).
//
// A message longer than kMaxPiece goes as several lines ({"piece": {"n", "of", "text"}}), put
// back together by the receiving Conn: a run's part with every probe sample is not bounded by
// one line's limit. A send that cannot finish (the peer takes nothing for its limit, or the
// socket fails) ends the connection here (shutdown): the peer then sees it closed, never half a
// line followed by the next message. Every connection keeps TCP keepalive and TCP_USER_TIMEOUT
// (kSilentMs): a peer whose machine stops answering (powered off, the underlay cut) ends the
// connection within seconds, with why (closed_why()).
// Not thread-safe: one thread drives a connection.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/ipv4.h"
#include "core/unique_fd.h"

namespace tb::multihost {

std::string base64_encode(std::string_view bytes);
Result<std::string> base64_decode(std::string_view text);

// The longest line a connection accepts (a file chunk is at most mirror.h kMaxChunk, base64).
inline constexpr size_t kMaxLine = 4u << 20;
// A message longer than this goes in pieces; a message put back together is at most kMaxMessage.
inline constexpr size_t kMaxPiece = 1u << 20;
inline constexpr size_t kMaxMessage = 256u << 20;
// How long a peer's kernel may leave our bytes unacknowledged, or our keepalive probes
// unanswered, before the connection ends (TCP_USER_TIMEOUT; keepalive after kKeepIdleS s idle,
// every kKeepIntvlS s).
// 3 s: a live peer's kernel acknowledges within milliseconds even when its testbedctl is busy,
// so a machine that is gone or cut off is what stays silent that long; 6 s until 2026-12-05
// left a run over two lab VMs ending 11.4 s after one powered off (issue 35's bound: 10 s).
// One more way to end it: since Linux 5.11 (9d9b1ee0b2d1) a zero window that lasts the user
// timeout ends the connection even while the peer answers the window probes, so a peer that
// reads nothing for 3 s while more than its socket buffers hold is sent to it is taken as gone.
// The session's messages while a side is not reading (the job, clocks, store files before a
// joiner's relay thread runs) are a few KB; a relay thread reads from then on.
inline constexpr int kSilentMs = 3000;
inline constexpr int kKeepIdleS = 1;
inline constexpr int kKeepIntvlS = 1;

// Keepalive and the user timeout above, and TCP_NODELAY, on a connected socket.
void tune_socket(int fd);

class Conn {
 public:
  Conn(UniqueFd fd, std::string peer) : fd_(std::move(fd)), peer_(std::move(peer)) {}
  Conn(Conn&&) noexcept = default;
  Conn& operator=(Conn&&) noexcept = default;

  // One message, one line (or its pieces); waits at most `limit` for the socket to take each
  // line. Not all of it taken: an error, and the connection is ended (closed() is true).
  Status send(const nlohmann::json& msg,
              std::chrono::milliseconds limit = std::chrono::milliseconds(10000));
  // What has arrived as whole lines (after waiting up to `wait_ms` for something to arrive).
  // The peer closing is no error: closed() says so once its last line was returned.
  Status receive(std::vector<nlohmann::json>& out, int wait_ms = 0);
  bool closed() const { return closed_; }
  // Why it ended when not by the peer's orderly close ("" then).
  const std::string& closed_why() const { return closed_why_; }
  int fd() const { return fd_.get(); }
  const std::string& peer() const { return peer_; }  // "198.19.254.2:41234"

 private:
  Status send_line(const std::string& line, std::chrono::milliseconds limit);
  void end(const std::string& why);
  Status take(nlohmann::json j, std::vector<nlohmann::json>& out);

  UniqueFd fd_;
  std::string peer_;
  std::string in_;
  std::string pieces_;  // a long message's pieces so far
  size_t piece_next_ = 0;
  bool closed_ = false;
  std::string closed_why_;
};

// Connects to `addr`:`port`, retrying (every 100 ms) while nobody listens yet or the route is
// missing, until `deadline` or `stop`.
Result<Conn> connect_to(Ipv4 addr, int port, std::chrono::steady_clock::time_point deadline,
                        const std::atomic<bool>& stop);

class Listener {
 public:
  // Listens on `addr`:`port` (SO_REUSEADDR). In use or not this host's address: exit 2.
  static Result<Listener> open(Ipv4 addr, int port);
  // A connection that arrived within `wait_ms`, or none.
  Result<std::optional<Conn>> accept(int wait_ms);

 private:
  explicit Listener(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace tb::multihost
