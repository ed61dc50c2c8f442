// nfnetlink_queue message builders and the notice parser (nfq_message.h).
#include "stage/nfq_message.h"

#include <arpa/inet.h>
#include <endian.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netlink.h>
// clang-format off: libnetfilter_queue.h needs the types above first
#include <libnetfilter_queue/libnetfilter_queue.h>
// clang-format on

#include <cstring>

namespace tb::stage {
namespace {

// NFQNL_COPY_META would copy no payload but also send no length: the kernel adds NFQA_CAP_LEN
// only in NFQNL_COPY_PACKET mode (net/netfilter/nfnetlink_queue.c nfqnl_build_packet_message,
// cap_len is set in that branch alone; checked on 6.18). So we ask for COPY_PACKET with a
// one-byte range: one byte is copied and the packet's full length comes along.
constexpr int kCopyRange = 1;
// A marking queue copies whole packets (the kernel caps the range at NFQNL_MAX_COPY_RANGE).
constexpr int kWholeCopyRange = 0xffff;

// Room for any one message built here (header, nfgenmsg, a few attributes).
constexpr size_t kMaxMessage = 256;

// Appends one message: `build` fills it in place starting at a zeroed, aligned region.
template <class Build>
void append(NlBuffer& out, Build&& build) {
  size_t at = out.size();
  out.resize(at + kMaxMessage);
  nlmsghdr* nlh = build(out.data() + at);
  out.resize(at + NLMSG_ALIGN(nlh->nlmsg_len));
}

}  // namespace

void append_bind(NlBuffer& out, uint16_t num, uint32_t maxlen, bool fail_open, uint32_t seq,
                 bool whole) {
  append(out, [&](char* buf) {
    nlmsghdr* nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, num);
    nlh->nlmsg_flags |= NLM_F_ACK;
    nlh->nlmsg_seq = seq;
    nfq_nlmsg_cfg_put_cmd(nlh, AF_UNSPEC, NFQNL_CFG_CMD_BIND);
    nfq_nlmsg_cfg_put_params(nlh, NFQNL_COPY_PACKET, whole ? kWholeCopyRange : kCopyRange);
    nfq_nlmsg_cfg_put_qmaxlen(nlh, maxlen);
    uint32_t flags = (whole ? 0 : NFQA_CFG_F_GSO) | (fail_open ? NFQA_CFG_F_FAIL_OPEN : 0);
    // Set every flag we know of explicitly, so a stale FAIL_OPEN cannot survive.
    uint32_t mask = NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN;
    mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS, htonl(flags));
    mnl_attr_put_u32(nlh, NFQA_CFG_MASK, htonl(mask));
    return nlh;
  });
}

void append_set_maxlen(NlBuffer& out, uint16_t num, uint32_t maxlen, uint32_t seq) {
  append(out, [&](char* buf) {
    nlmsghdr* nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, num);
    nlh->nlmsg_flags |= NLM_F_ACK;
    nlh->nlmsg_seq = seq;
    nfq_nlmsg_cfg_put_qmaxlen(nlh, maxlen);
    return nlh;
  });
}

void append_unbind(NlBuffer& out, uint16_t num, uint32_t seq) {
  append(out, [&](char* buf) {
    nlmsghdr* nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, num);
    nlh->nlmsg_flags |= NLM_F_ACK;
    nlh->nlmsg_seq = seq;
    nfq_nlmsg_cfg_put_cmd(nlh, AF_UNSPEC, NFQNL_CFG_CMD_UNBIND);
    return nlh;
  });
}

void append_verdict_batch(NlBuffer& out, uint16_t num, uint32_t last_id, uint32_t verdict) {
  append(out, [&](char* buf) {
    nlmsghdr* nlh = nfq_nlmsg_put(buf, NFQNL_MSG_VERDICT_BATCH, num);
    nfq_nlmsg_verdict_put(nlh, static_cast<int>(last_id), static_cast<int>(verdict));
    return nlh;
  });
}

void append_verdict(NlBuffer& out, uint16_t num, uint32_t id, uint32_t verdict) {
  append(out, [&](char* buf) {
    nlmsghdr* nlh = nfq_nlmsg_put(buf, NFQNL_MSG_VERDICT, num);
    nfq_nlmsg_verdict_put(nlh, static_cast<int>(id), static_cast<int>(verdict));
    return nlh;
  });
}

void append_verdict_payload(NlBuffer& out, uint16_t num, uint32_t id, uint32_t verdict,
                            std::span<const uint8_t> payload) {
  const size_t at = out.size();
  out.resize(at + kMaxMessage + MNL_ALIGN(payload.size()));
  nlmsghdr* nlh = nfq_nlmsg_put(out.data() + at, NFQNL_MSG_VERDICT, num);
  nfq_nlmsg_verdict_put(nlh, static_cast<int>(id), static_cast<int>(verdict));
  nfq_nlmsg_verdict_put_pkt(nlh, payload.data(), static_cast<uint32_t>(payload.size()));
  out.resize(at + NLMSG_ALIGN(nlh->nlmsg_len));
}

bool parse_events(std::span<const char> datagram, std::vector<NlEvent>& out) {
  const auto* nlh = reinterpret_cast<const nlmsghdr*>(datagram.data());
  int len = static_cast<int>(datagram.size());
  while (mnl_nlmsg_ok(nlh, len)) {
    NlEvent ev;
    if (nlh->nlmsg_type == NLMSG_ERROR) {
      if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) return false;
      const auto* err = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(nlh));
      ev.kind = NlEvent::Kind::kAck;
      ev.seq = nlh->nlmsg_seq;
      ev.error = -err->error;
    } else if (nlh->nlmsg_type == ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET)) {
      if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof(nfgenmsg))) return false;
      nlattr* attr[NFQA_MAX + 1] = {};
      if (nfq_nlmsg_parse(nlh, attr) < 0 || !attr[NFQA_PACKET_HDR]) return false;
      const auto* gen = static_cast<const nfgenmsg*>(mnl_nlmsg_get_payload(nlh));
      const auto* ph =
          static_cast<const nfqnl_msg_packet_hdr*>(mnl_attr_get_payload(attr[NFQA_PACKET_HDR]));
      ev.kind = NlEvent::Kind::kPacket;
      ev.packet.queue = ntohs(gen->res_id);
      ev.packet.id = ntohl(ph->packet_id);
      if (attr[NFQA_PAYLOAD])
        ev.packet.payload = {static_cast<const uint8_t*>(mnl_attr_get_payload(attr[NFQA_PAYLOAD])),
                             mnl_attr_get_payload_len(attr[NFQA_PAYLOAD])};
      if (attr[NFQA_CAP_LEN])
        ev.packet.len = ntohl(mnl_attr_get_u32(attr[NFQA_CAP_LEN]));
      else
        ev.packet.len = static_cast<uint32_t>(ev.packet.payload.size());
      if (attr[NFQA_TIMESTAMP] &&
          mnl_attr_get_payload_len(attr[NFQA_TIMESTAMP]) >= sizeof(nfqnl_msg_packet_timestamp)) {
        nfqnl_msg_packet_timestamp ts;
        std::memcpy(&ts, mnl_attr_get_payload(attr[NFQA_TIMESTAMP]), sizeof ts);
        ev.packet.stamp_ns = static_cast<int64_t>(be64toh(ts.sec)) * 1'000'000'000 +
                             static_cast<int64_t>(be64toh(ts.usec)) * 1000;
      }
    }
    out.push_back(ev);
    nlh = mnl_nlmsg_next(nlh, &len);
  }
  return true;
}

}  // namespace tb::stage
