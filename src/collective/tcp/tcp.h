// TcpComm: one process per rank, TCP through the lab's emulated links. Each pair of ranks
// holds `channels` connections (NCCL's channels, or QPs per connection); a transfer is cut
// into stripes, one per connection, that move at once. Every connection is made from the
// address the plan gives for that pair's tier (NVLink inside a server, the rail between
// servers, the frontend across regions) to the peer's address on the same tier, so traffic
// takes the intended path rather than whatever the routing table prefers.
//
// Set-up (connect): each rank listens on every address, publishes its port in the FileStore,
// connects to every lower rank (its listener's backlog accepts before anyone calls accept, so
// the order cannot deadlock) and accepts from every higher one; a hello names rank and channel.
// All I/O is non-blocking under one poll loop. A connection waiting for a receive has its
// receive low-water mark (SO_RCVLOWAT) at min(64 KiB, the bytes still due), so a wake-up moves
// tens of packets rather than one. The timeout is on the collective's progress: a
// transfer fails when no byte moved on any of its connections for that long and no other rank
// of the communicator moved a byte either (collective/progress.h: a rank idle while the others
// work, as a folded rank of halving-doubling over a slow link, waits on). Single-threaded, except
// interrupt(), which another thread may call while one is inside exchange().
//
// Port binding (TcpPeer::ports, opt-in: bench --ports spread): a GPU NIC with two ports on two
// ToRs (dual ToR) has one address on both, and the routing table hashes each connection onto
// one of them. With ports given, channel c of a pair leaves by ports[c % n] (SO_BINDTODEVICE)
// and is accepted by the peer's listener bound to its interface of the same name, so the
// SYN-ACK and every later segment of that connection stay on that port in both directions (as
// NCCL binds its channels to NIC ports). A bound connection does not move to the other port
// when its own goes down. Without ports nothing is bound: the routing table decides.
//
// A peer mask (TcpOptions::use) restricts the mesh to some peers (RdmaComm carries the others):
// only masked peers are connected, accepted and exchanged with; empty means every peer.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "collective/comm.h"
#include "collective/progress.h"
#include "collective/store.h"
#include "core/unique_fd.h"
#include "core/units.h"

namespace tb::collective {

struct TcpPeer {
  std::string dst;   // the peer's address this rank connects to ("" for itself / higher ranks)
  std::string src;   // this rank's address on that tier (bound before connecting)
  std::string tier;  // "nvl", "rail", "wan" (reports)
  // The interfaces the channels to this peer are bound to, in turn (channel c on
  // ports[c % size]); the peer's interfaces toward this rank have the same names in the same
  // order. Empty: unbound, the routing table picks (multipath hash).
  std::vector<std::string> ports;
};

// TCP connections per peer (--channels; NCCL's channels) a job may ask for.
inline constexpr IntRange kChannelsRange{1, 64};

struct TcpOptions {
  int rank = 0, size = 1, channels = 1;
  std::vector<TcpPeer> peers;  // by rank
  std::chrono::milliseconds timeout{30000};
  std::string key_prefix;  // store keys for this run
  std::vector<char> use;   // by rank: 1 = connect this peer; empty = every peer
};

class TcpComm final : public Comm {
 public:
  static Result<std::unique_ptr<TcpComm>> connect(const FileStore& store, const TcpOptions& o);
  ~TcpComm() override;

  int channels() const { return channels_; }
  // One exchange per ring step: the socket buffers keep the link busy while a received block is
  // reduced, and with the receive low-water mark a whole-step exchange wakes the rank less often
  // than 256 KiB slices do (scripts/bench-collectives, CPU-s/GB; docs/figures.md).
  size_t slice_bytes() const override { return kWholeSteps; }
  // Whether this rank holds connections to `peer` (the mask).
  bool uses(int peer) const { return use_[static_cast<size_t>(peer)] != 0; }
  // Makes the exchange in progress on another thread (and every later one) fail at once, with
  // "interrupted". Thread-safe: it only writes an eventfd the exchange polls.
  void interrupt() override;

 protected:
  Status do_exchange(std::span<const Xfer> xfers) override;
  void abort() override;

 private:
  TcpComm(const TcpOptions& o);
  UniqueFd& conn(int peer, int ch) { return conns_[static_cast<size_t>(peer * channels_ + ch)]; }
  // This rank's wait ran out at *deadline: whether another rank moved bytes within the timeout
  // (then *deadline moves to the timeout after that rank's last byte).
  bool wait_on(std::chrono::steady_clock::time_point* deadline) const;

  int channels_;
  std::chrono::milliseconds timeout_;
  std::vector<TcpPeer> peers_;
  std::vector<char> use_;                 // by rank, never empty (the mask, or all 1)
  std::vector<UniqueFd> conns_;           // peer * channels + channel
  std::vector<int> lowat_;                // each connection's SO_RCVLOWAT as last set (1: default)
  UniqueFd interrupt_;                    // eventfd; readable once interrupt() was called
  std::unique_ptr<ProgressBoard> board_;  // when each rank last moved a byte
};

}  // namespace tb::collective
