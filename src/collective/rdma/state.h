// RdmaComm's verbs objects, shared by its set-up (setup.cc) and data path (rdma.cc); not
// part of the public header so users of rdma.h need no verbs headers.
//
// Every object is owned by a small RAII wrapper, and declaration order is the teardown order
// reversed: per QP the QP goes first (rdma_destroy_qp), then its MRs (ibv_dereg_mr), its
// buffers, its CQ (ibv_destroy_cq: every CQ event was acknowledged as it came) and its
// rdma_cm_id (rdma_destroy_id: every cm event was acknowledged as it came); then per device
// the completion channel and the PD; then the listeners; the event channel last. Not
// thread-safe.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collective/rdma/rdma.h"
#include "collective/rdma/stream.h"
#include "core/unique_fd.h"

namespace tb::collective {

namespace rdma {

// Bounce buffers: `kDepth` slots of `kChunk` bytes per QP and direction (2 MiB per QP).
inline constexpr int kDepth = 16;
inline constexpr size_t kChunk = 64 * 1024;
// Minimum RNR NAK timer, IB encoding 12 = 0.64 ms (what NCCL sets, ncclIbRtrQp). The IB CM
// leaves 0 (cm_init_qp_rtr_attr), which encodes 655.36 ms: every receiver-not-ready would stall
// a sender that long. Set RTS->RTS once connected (ib_modify_qp_is_ok allows
// IB_QP_MIN_RNR_TIMER there for RC).
inline constexpr uint8_t kMinRnrTimer = 12;
// rnr_retry_count 7 means "retry forever" (IBA 9.7.5.2.8). The flow control is the receiver's
// credits (stream.h), so no RNR retry happens in normal operation; the setting stays as a
// backstop that stalls rather than fails should one happen.
inline constexpr uint8_t kRnrRetryForever = 7;
// Send queue entries: a data send per send buffer, plus the credit-only messages in flight.
inline constexpr int kSendWrs = kDepth + QpStream::kMaxCreditSends;
// Completion queue entries: every send and every posted receive, plus one.
inline constexpr int kCqEntries = kSendWrs + kDepth + 1;

struct EventChannelFree {
  void operator()(rdma_event_channel* c) const { rdma_destroy_event_channel(c); }
};
struct CmIdFree {
  void operator()(rdma_cm_id* id) const { rdma_destroy_id(id); }
};
struct PdFree {
  void operator()(ibv_pd* p) const { ibv_dealloc_pd(p); }
};
struct CompChannelFree {
  void operator()(ibv_comp_channel* c) const { ibv_destroy_comp_channel(c); }
};
struct CqFree {
  void operator()(ibv_cq* c) const { ibv_destroy_cq(c); }
};
struct MrFree {
  void operator()(ibv_mr* m) const { ibv_dereg_mr(m); }
};
struct BufferFree {
  void operator()(char* p) const { std::free(p); }
};
using EventChannel = std::unique_ptr<rdma_event_channel, EventChannelFree>;
using CmId = std::unique_ptr<rdma_cm_id, CmIdFree>;
using Pd = std::unique_ptr<ibv_pd, PdFree>;
using CompChannel = std::unique_ptr<ibv_comp_channel, CompChannelFree>;
using Cq = std::unique_ptr<ibv_cq, CqFree>;
using Mr = std::unique_ptr<ibv_mr, MrFree>;
using Buffer = std::unique_ptr<char, BufferFree>;

// The QP rdma_create_qp made on an id; destroyed through the id.
class CmQp {
 public:
  CmQp() = default;
  CmQp(const CmQp&) = delete;
  CmQp& operator=(const CmQp&) = delete;
  ~CmQp() { reset(); }
  void reset(rdma_cm_id* id = nullptr) {
    if (id_ && id_->qp) rdma_destroy_qp(id_);
    id_ = id;
  }
  ibv_qp* get() const { return id_ ? id_->qp : nullptr; }

 private:
  rdma_cm_id* id_ = nullptr;
};

// A received cm event, acknowledged when this goes away (rdma_destroy_id waits for that).
class CmEvent {
 public:
  explicit CmEvent(rdma_cm_event* e) : e_(e) {}
  CmEvent(const CmEvent&) = delete;
  CmEvent& operator=(const CmEvent&) = delete;
  ~CmEvent() { ack(); }
  void ack() {
    if (e_) rdma_ack_cm_event(e_);
    e_ = nullptr;
  }
  rdma_cm_event* operator->() const { return e_; }

 private:
  rdma_cm_event* e_;
};

// Per ibv_context: the protection domain and the completion channel every CQ on it reports to.
struct Device {
  ibv_context* ctx = nullptr;
  std::string name;
  Pd pd;
  CompChannel channel;
};

struct Qp {
  enum Phase { kResolvingAddr, kResolvingRoute, kConnecting, kAccepting, kConnected };
  int peer = 0, index = 0;
  Phase phase = kResolvingAddr;
  std::string src, dst;  // addresses, for messages
  int port = 0;          // the peer's listener (active side)
  Device* dev = nullptr;
  // Destroyed bottom-up: QP, MRs, buffers, CQ, id.
  CmId id;
  Cq cq;
  Buffer send_buf, recv_buf;
  Mr send_mr, recv_mr;
  CmQp qp;
  std::optional<QpStream> stream;
  bool armed = false;  // ibv_req_notify_cq called and its event not yet taken
  std::string broken;  // why the connection is unusable; "" while it is fine
};

// wr_id: the kind in the high half, the slot in the low half (a failed completion's opcode is
// undefined, so the kind must travel in wr_id).
enum WrKind : uint64_t { kWrSend = 1, kWrRecv = 2, kWrCredit = 3 };
inline uint64_t wr_id(WrKind k, int slot) {
  return (static_cast<uint64_t>(k) << 32) | static_cast<uint32_t>(slot);
}
inline WrKind wr_kind(uint64_t id) {
  return static_cast<WrKind>(id >> 32);
}
inline int wr_slot(uint64_t id) {
  return static_cast<int>(id & 0xffffffffu);
}

Status post_recv(Qp& q, int slot);
// A SEND of `len` bytes from send buffer `slot` with `credits` as its immediate data.
Status post_send(Qp& q, int slot, size_t len, uint32_t credits);
// A zero-byte SEND carrying `credits` (QpStream::next_credit).
Status post_credit(Qp& q, uint32_t credits);
// The credits a receive completion carries (its immediate data; 0 without one).
uint32_t credits_of(const ibv_wc& wc);
// "rank 3 (rail, qp 1)"
std::string qp_name(const RdmaOptions& o, const Qp& q);

}  // namespace rdma

struct RdmaComm::State {
  RdmaOptions o;
  rdma::EventChannel channel;  // destroyed last
  std::vector<rdma::CmId> listeners;
  std::vector<std::string> listen_addrs;
  std::vector<std::unique_ptr<rdma::Device>> devices;
  std::vector<std::unique_ptr<rdma::Qp>> qps;
  std::vector<rdma::Qp*> by_pair;  // peer * qps + index; null until that connection exists
  UniqueFd wake;                   // eventfd: the TCP thread's failure wakes the RDMA wait

  rdma::Qp*& pair(int peer, int index) {
    return by_pair[static_cast<size_t>(peer * o.qps + index)];
  }
};

// The RDMA half of RdmaComm::connect (setup.cc): the listeners (their ports published),
// the connections and acceptances within s.o.timeout, then `after` (the TCP part's set-up).
// Requests are answered as they come: one left queued for seconds is timed out by the CM.
Status rdma_setup(RdmaComm::State& s, const FileStore& store, const std::function<Status()>& after);

}  // namespace tb::collective
