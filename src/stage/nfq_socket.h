// NfqSocket: the delay stage's one NETLINK_NETFILTER socket, bound in the network namespace the
// calling thread is in when it is opened (a netlink socket stays there for good).
//
// Owns the descriptor (move-only). Sized for bursts: a big receive buffer (SO_RCVBUFFORCE, as
// root) and NETLINK_NO_ENOBUFS, so an overrun costs the packets the kernel could not hand over
// (counted in /proc/net/netfilter/nfnetlink_queue "user dropped") instead of an error that would
// stop the loop. Not thread-safe: one loop owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"
#include "core/units.h"
#include "stage/nfq_message.h"

namespace tb::stage {

class NfqSocket {
 public:
  static Result<NfqSocket> open(int rcvbuf_bytes);

  int fd() const { return fd_.get(); }
  uint32_t next_seq() { return ++seq_; }

  // Sends every message in `buf` as one datagram, fire-and-forget (verdicts).
  Status send(const NlBuffer& buf);
  // One pending datagram, or an empty span when none is (never blocks). The span stays valid
  // until the next receive.
  Result<std::span<const char>> receive_nowait();
  // Sends `buf` (one message asking for an ACK with sequence `seq`) and waits at most `timeout`
  // for that ACK. Everything else that arrives meanwhile (queued packets) goes to `other`, so no
  // packet is lost while we wait. A refusal reads "<what>: <strerror>".
  Status request(const NlBuffer& buf, uint32_t seq, const std::string& what, Duration timeout,
                 const std::function<void(const NlEvent&)>& other);

 private:
  explicit NfqSocket(UniqueFd fd) : fd_(std::move(fd)), rx_(kReceiveBuffer) {}
  // Large enough for any nfnetlink_queue datagram with a 1-byte copy range (nfq_message.h).
  static constexpr size_t kReceiveBuffer = 1 << 16;

  UniqueFd fd_;
  std::vector<char> rx_;
  uint32_t seq_ = 0;
};

}  // namespace tb::stage
