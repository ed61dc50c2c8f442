// The verbs calls RdmaComm's set-up and data path share: posting one receive or one send of a
// bounce buffer or a credit-only message, reading a completion's credits, naming a QP.
#include <arpa/inet.h>

#include <cstring>

#include "collective/rdma/state.h"

namespace tb::collective {

namespace rdma {

Status post_recv(Qp& q, int slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(q.stream->recv_slot(slot));
  sge.length = static_cast<uint32_t>(kChunk);
  sge.lkey = q.recv_mr->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = wr_id(kWrRecv, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (const int rc = ibv_post_recv(q.qp.get(), &wr, &bad); rc != 0)
    return fail("ibv_post_recv (rank " + std::to_string(q.peer) + ", qp " +
                    std::to_string(q.index) + ", buffer " + std::to_string(slot) +
                    "): " + std::strerror(rc),
                rc);
  return {};
}

Status post_send(Qp& q, int slot, size_t len, uint32_t credits) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(q.stream->send_slot(slot));
  sge.length = static_cast<uint32_t>(len);
  sge.lkey = q.send_mr->lkey;
  ibv_send_wr wr{};
  wr.wr_id = wr_id(kWrSend, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND_WITH_IMM;  // the immediate: receives posted again (stream.h)
  wr.imm_data = htonl(credits);
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(q.qp.get(), &wr, &bad); rc != 0)
    return fail("ibv_post_send (rank " + std::to_string(q.peer) + ", qp " +
                    std::to_string(q.index) + ", " + std::to_string(len) +
                    " bytes): " + std::strerror(rc),
                rc);
  return {};
}

Status post_credit(Qp& q, uint32_t credits) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id(kWrCredit, 0);
  wr.sg_list = nullptr;
  wr.num_sge = 0;  // zero bytes: the immediate data is the message
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(credits);
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(q.qp.get(), &wr, &bad); rc != 0)
    return fail("ibv_post_send (rank " + std::to_string(q.peer) + ", qp " +
                    std::to_string(q.index) + ", credit-only message, " + std::to_string(credits) +
                    " credits): " + std::strerror(rc),
                rc);
  return {};
}

uint32_t credits_of(const ibv_wc& wc) {
  return (wc.wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc.imm_data) : 0;
}

std::string qp_name(const RdmaOptions& o, const Qp& q) {
  return "rank " + std::to_string(q.peer) + " (" + o.peers[static_cast<size_t>(q.peer)].tier +
         ", qp " + std::to_string(q.index) + ")";
}

}  // namespace rdma

}  // namespace tb::collective
