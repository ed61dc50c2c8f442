#include "capability/rc_send.h"

#include <infiniband/verbs.h>

#include <cstring>
#include <memory>
#include <thread>

#include "apply/rxe.h"

namespace tb::capability::probe {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kBytes = 64;

struct End {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  char buf[kBytes] = {};
  int gid_index = -1;
  ibv_gid gid{};

  ~End() {
    if (qp) ibv_destroy_qp(qp);
    if (mr) ibv_dereg_mr(mr);
    if (cq) ibv_destroy_cq(cq);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
};

Status open_end(End& e, const std::string& dev, Ipv4 addr, Clock::time_point deadline) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return sys_fail("ibv_get_device_list");
  for (int i = 0; i < n && !e.ctx; ++i)
    if (dev == ibv_get_device_name(list[i])) e.ctx = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  if (!e.ctx)
    return fail("verbs cannot open " + dev +
                " (is the rxe provider, ibverbs-providers, installed?)");
  auto gid = apply::wait_rocev2_gid(dev, addr, deadline);
  if (!gid) return fail("no RoCE v2 GID for " + addr.to_string() + " on " + dev);
  e.gid_index = gid->index;
  if (ibv_query_gid(e.ctx, 1, e.gid_index, &e.gid) != 0) return sys_fail("ibv_query_gid " + dev);
  e.pd = ibv_alloc_pd(e.ctx);
  e.cq = e.pd ? ibv_create_cq(e.ctx, 4, nullptr, nullptr, 0) : nullptr;
  e.mr = e.cq ? ibv_reg_mr(e.pd, e.buf, kBytes, IBV_ACCESS_LOCAL_WRITE) : nullptr;
  if (!e.mr) return sys_fail("verbs set-up (pd, cq, mr) on " + dev);
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = e.cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  e.qp = ibv_create_qp(e.pd, &qa);
  if (!e.qp) return sys_fail("ibv_create_qp on " + dev);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  if (int rc = ibv_modify_qp(e.qp, &a,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return sys_fail("QP to INIT on " + dev, rc);
  return {};
}

Status connect_to(End& e, const End& peer, const std::string& dev) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer.qp->qp_num;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer.gid;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(e.gid_index);
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  if (int rc = ibv_modify_qp(e.qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return sys_fail("QP to RTR on " + dev, rc);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;  // 4.096 us * 2^14 = 67 ms per try
  a.retry_cnt = 3;
  a.rnr_retry = 3;
  a.max_rd_atomic = 1;
  if (int rc = ibv_modify_qp(e.qp, &a,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    return sys_fail("QP to RTS on " + dev, rc);
  return {};
}

}  // namespace

Result<int> rc_send_between(const std::string& dev_a, Ipv4 addr_a, const std::string& dev_b,
                            Ipv4 addr_b, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  auto a = std::make_unique<End>(), b = std::make_unique<End>();
  TB_TRY(open_end(*a, dev_a, addr_a, deadline));
  TB_TRY(open_end(*b, dev_b, addr_b, deadline));
  ibv_sge rs{reinterpret_cast<uintptr_t>(b->buf), kBytes, b->mr->lkey};
  ibv_recv_wr rwr{};
  rwr.wr_id = 2;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  if (int rc = ibv_post_recv(b->qp, &rwr, &bad_r)) return sys_fail("ibv_post_recv", rc);
  TB_TRY(connect_to(*a, *b, dev_a));
  TB_TRY(connect_to(*b, *a, dev_b));
  for (int i = 0; i < kBytes; ++i) a->buf[i] = static_cast<char>('a' + i % 26);
  ibv_sge ss{reinterpret_cast<uintptr_t>(a->buf), kBytes, a->mr->lkey};
  ibv_send_wr swr{};
  swr.wr_id = 1;
  swr.sg_list = &ss;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  swr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad_s = nullptr;
  if (int rc = ibv_post_send(a->qp, &swr, &bad_s)) return sys_fail("ibv_post_send", rc);
  bool sent = false, received = false;
  int got = 0;
  while (!(sent && received)) {
    ibv_wc wc{};
    for (End* e : {a.get(), b.get()}) {
      const int n = ibv_poll_cq(e->cq, 1, &wc);
      if (n < 0) return fail("ibv_poll_cq failed");
      if (n == 0) continue;
      if (wc.status != IBV_WC_SUCCESS)
        return fail(std::string("a 64-byte RC send ") +
                    (wc.wr_id == 1 ? "completed with error" : "was received with error") + " '" +
                    ibv_wc_status_str(wc.status) + "'");
      if (wc.wr_id == 1) sent = true;
      if (wc.wr_id == 2) {
        received = true;
        got = static_cast<int>(wc.byte_len);
      }
    }
    if (Clock::now() >= deadline)
      return fail(std::string("a 64-byte RC send did not complete within ") +
                  std::to_string(limit.count()) + " ms (" + (sent ? "sent" : "not sent") + ", " +
                  (received ? "received" : "not received") + ")");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (got != kBytes || std::memcmp(a->buf, b->buf, kBytes) != 0)
    return fail("a 64-byte RC send arrived with different bytes");
  return got;
}

}  // namespace tb::capability::probe
