// nfnetlink_queue messages the delay stage sends and the packet notices it reads, built apart from
// any socket (STYLE rule 7) so unit tests can check their bytes.
//
// Built with libnetfilter_queue's libmnl-based helpers (nfq_nlmsg_*), not its older nfq_handle
// API: the stage owns its socket, and one send() can carry many verdicts.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace tb::stage {

using NlBuffer = std::vector<char>;

// Binds queue `num` to the sending socket (NFQNL_CFG_CMD_BIND) and configures it in the same
// message: a one-byte NFQNL_COPY_PACKET (in effect no payload copy, but the length is reported;
// plain NFQNL_COPY_META reports none), queue maxlen, flags NFQA_CFG_F_GSO (whole GSO
// super-packets, research/limits.md 4b) plus NFQA_CFG_F_FAIL_OPEN when `fail_open`. Asks for an
// ACK with sequence `seq`.
// `whole` (an ECN marking queue, mark_table.h): the whole packet is copied and NFQA_CFG_F_GSO is
// left off, so the kernel hands over segments (skb_gso_segment) with finished checksums
// (skb_checksum_help before the copy, nfqnl_build_packet_message) and a verdict may carry the
// packet back changed (append_verdict_payload).
void append_bind(NlBuffer& out, uint16_t num, uint32_t maxlen, bool fail_open, uint32_t seq,
                 bool whole = false);
// Changes only the maxlen of a bound queue (ACK requested).
void append_set_maxlen(NlBuffer& out, uint16_t num, uint32_t maxlen, uint32_t seq);
// NFQNL_CFG_CMD_UNBIND (ACK requested). The kernel drops whatever the queue still holds.
void append_unbind(NlBuffer& out, uint16_t num, uint32_t seq);
// NFQNL_MSG_VERDICT_BATCH: `verdict` (NF_ACCEPT, NF_DROP) for every packet of queue `num` with an
// id up to and including `last_id`. No ACK: verdicts are fire-and-forget.
void append_verdict_batch(NlBuffer& out, uint16_t num, uint32_t last_id, uint32_t verdict);
// NFQNL_MSG_VERDICT for one packet.
void append_verdict(NlBuffer& out, uint16_t num, uint32_t id, uint32_t verdict);
// NFQNL_MSG_VERDICT for one packet with NFQA_PAYLOAD: the kernel replaces the packet's bytes by
// `payload` (nfqnl_mangle; the skb is then CHECKSUM_NONE, so its L4 checksum must be whole).
void append_verdict_payload(NlBuffer& out, uint16_t num, uint32_t id, uint32_t verdict,
                            std::span<const uint8_t> payload);

// A queued-packet notice (NFQNL_MSG_PACKET).
struct PacketNotice {
  uint16_t queue = 0;
  uint32_t id = 0;
  uint32_t len = 0;  // NFQA_CAP_LEN: the packet's full length (0 when the kernel sent none)
  // NFQA_TIMESTAMP: the skb's timestamp in ns (microsecond resolution), 0 when the kernel sent
  // none. The kernel sends skb->tstamp as it is: CLOCK_REALTIME when the receive path stamped
  // the packet (netif_rx, while any socket has asked for receive timestamps), but a sender's
  // CLOCK_MONOTONIC departure time for TCP (EDT) packets; calibration.h tells them apart.
  int64_t stamp_ns = 0;
  // NFQA_PAYLOAD: the bytes copied (one, or the whole packet on a `whole` queue), pointing into
  // the datagram parsed; valid until the socket's next receive. len is its size when the kernel
  // sent no NFQA_CAP_LEN (it does only when it copied less than the packet).
  std::span<const uint8_t> payload;
};
// What one received netlink message is.
struct NlEvent {
  enum class Kind { kPacket, kAck, kOther } kind = Kind::kOther;
  PacketNotice packet;  // kPacket
  uint32_t seq = 0;     // kAck: the request it answers
  int error = 0;        // kAck: 0 or a positive errno
};
// Appends one NlEvent per netlink message in one received datagram. Returns false when the
// datagram is malformed (truncated header or attributes); events before the fault are kept.
bool parse_events(std::span<const char> datagram, std::vector<NlEvent>& out);

}  // namespace tb::stage
