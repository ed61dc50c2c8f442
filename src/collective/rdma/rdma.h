// RdmaComm: one process per rank, with the rail pairs over RDMA verbs (Soft-RoCE in a lab) and
// every other pair over TCP, the way NCCL runs its IB transport between servers and something
// else inside one. Which pairs go over RDMA is decided by the caller (RdmaOptions::rdma, from
// launch::mark_rdma_pairs); a pair marked RDMA that has no device fails, never falls back.
//
// Per RDMA peer, `qps` reliable-connected queue pairs (NCCL_IB_QPS_PER_CONNECTION), one
// rdma_cm_id each; a transfer is cut into stripes across them with TcpComm's rule. Set-up goes
// through librdmacm: a listener on each of this rank's RDMA source addresses (its port in the
// FileStore under "<prefix>rdmaport.<rank>"), connections to lower ranks, acceptances from
// higher ones, the private data naming rank and QP. The data path is two-sided SEND/RECV
// through registered bounce buffers (collective/rdma/stream.h): per QP `depth` receive buffers
// of `chunk` bytes stay posted and `depth` send buffers cycle. The flow control is the
// receiver's credits: every message carries in its immediate data the receives its sender
// posted again, and a sender never posts more SENDs than the peer has receives posted, so no
// receiver-not-ready retry (each >= 0.64 ms of a stalled QP) happens in normal operation. An
// exchange ends once its bytes are received and its sends copied out and posted, without
// waiting for their acknowledgement (a send buffer is reused only after its completion); the
// destructor waits for the last ones. Waiting is on completion channels and the rdma_cm event
// channel under poll(), never by spinning. The timeout is on the collective's progress, as
// TcpComm's: an exchange times out when neither it nor any other rank of the communicator moved
// a byte for that long (collective/progress.h), not when this rank alone waits.
//
// Pairs not marked RDMA run on an internal TcpComm restricted to them. An exchange with both
// kinds runs the TCP part on a second thread and the RDMA part on the caller's; the first error
// stops both. abort() disconnects every connection, so peers see RDMA_CM_EVENT_DISCONNECTED
// at once. Otherwise single-threaded, like every Comm.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "collective/comm.h"
#include "collective/progress.h"
#include "collective/store.h"
#include "collective/tcp/tcp.h"
#include "core/units.h"

namespace tb::collective {

struct RdmaOptions {
  int rank = 0, size = 1;
  int qps = 1;                 // queue pairs per RDMA peer (NCCL_IB_QPS_PER_CONNECTION)
  int channels = 1;            // TCP connections per peer that is not over RDMA
  std::vector<TcpPeer> peers;  // by rank: addresses and tier, as for TcpComm
  std::vector<char> rdma;      // by rank: 1 = this pair goes over RDMA, 0 = TCP
  std::vector<char> use;       // by rank: 0 = another transport carries it (ShmComm); empty = all
  std::chrono::milliseconds timeout{30000};
  std::string key_prefix;  // store keys for this run
  int ib_timeout = 14;     // local ACK timeout exponent: 4.096 us * 2^t (NCCL_IB_TIMEOUT)
  int ib_retry_cnt = 7;    // transport retries before IBV_WC_RETRY_EXC_ERR (NCCL_IB_RETRY_CNT)
};

// The tunables' ranges. The ACK timeout is the QP attribute `timeout` (5 bits; 0 means
// infinite, which would hide a dead peer), the retries `retry_cnt` (3 bits).
inline constexpr IntRange kQpsRange{1, 16};
inline constexpr IntRange kIbTimeoutRange{1, 31};
inline constexpr IntRange kIbRetryCntRange{0, 7};
// The ranges above; the message names the flag (--qps 1..16, --ib-timeout 1..31,
// --ib-retry-cnt 0..7). Exit code 2.
Status validate_rdma_tuning(int qps, int ib_timeout, int ib_retry_cnt);
// validate_rdma_tuning plus the options' shape (rank, peers, rdma sized by `size`).
Status validate(const RdmaOptions& o);

// What a communicator moves its bytes over, for reports.
struct RdmaDescription {
  std::vector<int> rdma_peers, tcp_peers;
  std::vector<std::string> rdma_tiers, tcp_tiers;  // distinct, in peer order
  std::vector<std::string> devices;                // RDMA devices in use (ibv_device names)
  int qps = 1, channels = 1, ib_timeout = 14, ib_retry_cnt = 7, depth = 0;
  size_t chunk = 0;
  // "native over rdma: rail pairs on RDMA device rxe0 (2 QPs/peer, ib_timeout 14 (67.1 ms),
  // retry 7; SEND/RECV through 16 x 64 KiB buffers per QP and direction), nvl pairs on tcp
  // (1 connection(s) per peer)"
  std::string to_string() const;
};

class RdmaComm final : public Comm {
 public:
  // Sets up the TCP part (if any pair is not RDMA), then the RDMA connections, each bounded by
  // o.timeout. An error names rank, peer, addresses, tier and the rdma_cm event received.
  static Result<std::unique_ptr<RdmaComm>> connect(const FileStore& store, const RdmaOptions& o);
  ~RdmaComm() override;
  // Posted receives pipeline a whole step (as TCP's socket buffers do), and an exchange costs a
  // wake-up at least: the algorithms keep whole ring steps over RDMA.
  size_t slice_bytes() const override { return kWholeSteps; }

  const RdmaDescription& description() const { return description_; }
  // Makes the exchange in progress (its RDMA and TCP parts) and every later one fail at once.
  void interrupt() override;

  struct State;  // the verbs objects (collective/rdma/state.h)

 protected:
  Status do_exchange(std::span<const Xfer> xfers) override;
  void abort() override;

 private:
  explicit RdmaComm(const RdmaOptions& o);
  Status exchange_rdma(std::span<const Xfer> xfers, bool* interrupted);
  // Waits (up to the timeout) for every posted send's completion: an exchange ends before its
  // last sends are acknowledged, and destroying a QP drops what it has not sent.
  void drain();

  std::vector<char> rdma_;
  std::vector<TcpPeer> peers_;
  std::unique_ptr<State> s_;
  std::unique_ptr<TcpComm> tcp_;  // the non-RDMA pairs; null when there are none
  RdmaDescription description_;
  std::unique_ptr<ProgressBoard> board_;  // when each rank last moved a byte
  std::atomic<bool> interrupted_{false};  // interrupt() was called
};

}  // namespace tb::collective
