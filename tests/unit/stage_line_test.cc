// stage/: the delay line's arithmetic, nfnetlink_queue message bytes, the stats document and the
// parsing of iptables/nft output — everything of the delay stage that needs no root.
#include <arpa/inet.h>
#include <endian.h>
#include <gtest/gtest.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <unistd.h>
#include <cstring>
#include <filesystem>
#include <random>

#include "stage/delay_line.h"
#include "stage/mark_table.h"
#include "stage/netfilter_rules.h"
#include "stage/nfq_message.h"
#include "stage/stats.h"

namespace tb::stage {
namespace {

constexpr int64_t kMs = 1'000'000;

// The attributes of the one NFQNL_MSG_CONFIG message in `b`, in order: (type, payload).
std::vector<std::pair<uint16_t, std::vector<uint8_t>>> config_attrs(const NlBuffer& b) {
  std::vector<std::pair<uint16_t, std::vector<uint8_t>>> attrs;
  size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg));
  while (off + sizeof(nlattr) <= b.size()) {
    const auto* a = reinterpret_cast<const nlattr*>(b.data() + off);
    const auto* p = reinterpret_cast<const uint8_t*>(a) + NLA_HDRLEN;
    attrs.push_back({a->nla_type, std::vector<uint8_t>(p, p + a->nla_len - NLA_HDRLEN)});
    off += NLA_ALIGN(a->nla_len);
  }
  return attrs;
}

TEST(DelayLine, HoldsForTheDelayAndReleasesInOrder) {
  DelayLine line({10, Duration{10 * kMs}, Duration{0}, 1024}, 1);
  EXPECT_FALSE(line.next_deadline());
  ASSERT_TRUE(line.admit(1, 100, 0));
  ASSERT_TRUE(line.admit(2, 200, 1 * kMs));
  ASSERT_TRUE(line.admit(3, 300, 2 * kMs));
  EXPECT_EQ(*line.next_deadline(), 10 * kMs);
  EXPECT_FALSE(line.release_due(10 * kMs - 1));
  EXPECT_EQ(line.release_due(11 * kMs + 500), 2u);  // 1 and 2 are due; the batch ends at 2
  EXPECT_EQ(line.held(), 1u);
  EXPECT_EQ(line.release_due(20 * kMs), 3u);
  const auto& c = line.counters();
  EXPECT_EQ(c.packets, 3u);
  EXPECT_EQ(c.bytes, 600u);
  EXPECT_EQ(c.released, 3u);
  EXPECT_EQ(c.held_max, 3u);
  EXPECT_EQ(c.late_ns_max, uint64_t(8 * kMs));  // packet 3: due 12, out at 20
  EXPECT_EQ(c.late_ns_sum, uint64_t((1 * kMs + 500) + 500 + 8 * kMs));
}

TEST(DelayLine, JitterNeverReorders) {
  DelayLine line({1, Duration{5 * kMs}, Duration{3 * kMs}, 100000}, 42);
  int64_t last = 0;
  double sum = 0;
  for (uint32_t i = 0; i < 20000; ++i) {
    int64_t now = static_cast<int64_t>(i) * 10 * kMs;  // sparse: jitter is not compressed
    ASSERT_TRUE(line.admit(i, 64, now));
    int64_t d = *line.next_deadline();
    ASSERT_GE(d, last);
    ASSERT_GE(d, now);
    ASSERT_LE(d, now + 17 * kMs);  // clamped at delay + 4 sigma
    sum += static_cast<double>(d - now);
    last = d;
    line.release_due(d);
  }
  EXPECT_NEAR(sum / 20000 / kMs, 5.0, 0.15);  // the mean delay is kept
  // Dense arrivals: deadlines stay monotonic even when samples go backwards.
  DelayLine dense({2, Duration{5 * kMs}, Duration{3 * kMs}, 100000}, 7);
  for (uint32_t i = 0; i < 5000; ++i) ASSERT_TRUE(dense.admit(i, 64, i * 1000));
  std::optional<uint32_t> prev;
  for (int64_t t = 0; t < 40 * kMs; t += 100'000)
    if (auto id = dense.release_due(t)) {
      if (prev) {
        ASSERT_GT(*id, *prev);
      }
      prev = id;
    }
  EXPECT_EQ(prev, 4999u);
}

TEST(DelayLine, FullLineRefusesAndGrows) {
  DelayLine line({3, Duration{kMs}, Duration{0}, 5000}, 1);
  for (uint32_t i = 0; i < 5000; ++i) ASSERT_TRUE(line.admit(i, 1, 0));  // grows past 4096
  EXPECT_FALSE(line.admit(5000, 1, 0));
  EXPECT_EQ(line.counters().drops_full, 1u);
  EXPECT_EQ(line.release_due(kMs), 4999u);
  // A smaller maxlen applies to later packets only; a reconfigured delay too.
  line.reconfigure({3, Duration{2 * kMs}, Duration{0}, 2});
  EXPECT_TRUE(line.admit(1, 1, 10 * kMs));
  EXPECT_TRUE(line.admit(2, 1, 10 * kMs));
  EXPECT_FALSE(line.admit(3, 1, 10 * kMs));
  EXPECT_EQ(*line.next_deadline(), 12 * kMs);
  EXPECT_EQ(line.release_all(), 2u);
  EXPECT_EQ(line.counters().flushed, 2u);
  EXPECT_FALSE(line.release_all());
}

TEST(DelayLine, ShorterDelayKeepsOrder) {
  DelayLine line({3, Duration{20 * kMs}, Duration{0}, 100}, 1);
  line.admit(1, 1, 0);  // due at 20 ms
  line.reconfigure({3, Duration{10 * kMs}, Duration{0}, 100});
  line.admit(2, 1, 1 * kMs);  // would be 11 ms: waits for packet 1
  EXPECT_EQ(line.release_due(15 * kMs), std::nullopt);
  EXPECT_EQ(line.release_due(20 * kMs), 2u);
}

const nlmsghdr* header(const NlBuffer& b) {
  return reinterpret_cast<const nlmsghdr*>(b.data());
}

TEST(NfqMessage, BindAsksForAckAndConfiguresEverything) {
  NlBuffer b;
  append_bind(b, 10, 65536, false, 77);
  const nlmsghdr* h = header(b);
  EXPECT_EQ(h->nlmsg_len, b.size());
  EXPECT_EQ(h->nlmsg_type, (NFNL_SUBSYS_QUEUE << 8) | 2);  // NFQNL_MSG_CONFIG
  EXPECT_EQ(h->nlmsg_flags, NLM_F_REQUEST | NLM_F_ACK);
  EXPECT_EQ(h->nlmsg_seq, 77u);
  const auto* gen = reinterpret_cast<const nfgenmsg*>(NLMSG_DATA(h));
  EXPECT_EQ(ntohs(gen->res_id), 10);
  // Attributes: CMD(bind), PARAMS(copy packet, range 1), QUEUE_MAXLEN, FLAGS(GSO), MASK.
  const auto attrs = config_attrs(b);
  ASSERT_EQ(attrs.size(), 5u);
  EXPECT_EQ(attrs[0].first, 1);                                       // NFQA_CFG_CMD
  EXPECT_EQ(attrs[0].second[0], 1);                                   // NFQNL_CFG_CMD_BIND
  EXPECT_EQ(attrs[1].first, 2);                                       // NFQA_CFG_PARAMS
  EXPECT_EQ(attrs[1].second, (std::vector<uint8_t>{0, 0, 0, 1, 2}));  // range 1, COPY_PACKET
  EXPECT_EQ(attrs[2].first, 3);                                       // NFQA_CFG_QUEUE_MAXLEN
  EXPECT_EQ(attrs[2].second, (std::vector<uint8_t>{0, 1, 0, 0}));     // 65536, big-endian
  EXPECT_EQ(attrs[3].first, 5);                                       // NFQA_CFG_FLAGS: GSO only
  EXPECT_EQ(attrs[3].second, (std::vector<uint8_t>{0, 0, 0, 4}));
  EXPECT_EQ(attrs[4].first, 4);  // NFQA_CFG_MASK: GSO | FAIL_OPEN
  EXPECT_EQ(attrs[4].second, (std::vector<uint8_t>{0, 0, 0, 5}));
  NlBuffer open;
  append_bind(open, 10, 1024, true, 1);
  EXPECT_EQ(static_cast<uint8_t>(open[open.size() - 9]), 5);  // FLAGS now GSO | FAIL_OPEN
}

TEST(NfqMessage, VerdictsChainInOneBuffer) {
  NlBuffer b;
  append_verdict(b, 3, 41, NF_DROP);
  size_t first = b.size();
  append_verdict_batch(b, 3, 0xfffffffe, NF_ACCEPT);
  EXPECT_EQ(b.size(), 2 * first);
  const nlmsghdr* h = header(b);
  EXPECT_EQ(h->nlmsg_type, (NFNL_SUBSYS_QUEUE << 8) | 1);  // NFQNL_MSG_VERDICT
  EXPECT_EQ(h->nlmsg_flags, NLM_F_REQUEST);                // no ACK for verdicts
  const auto* h2 = reinterpret_cast<const nlmsghdr*>(b.data() + first);
  EXPECT_EQ(h2->nlmsg_type, (NFNL_SUBSYS_QUEUE << 8) | 3);  // NFQNL_MSG_VERDICT_BATCH
  // nfqnl_msg_verdict_hdr {verdict, id}, both big-endian, after the attribute header.
  const auto* v = reinterpret_cast<const uint32_t*>(b.data() + first + NLMSG_HDRLEN +
                                                    NLMSG_ALIGN(sizeof(nfgenmsg)) + NLA_HDRLEN);
  EXPECT_EQ(ntohl(v[0]), uint32_t(NF_ACCEPT));
  EXPECT_EQ(ntohl(v[1]), 0xfffffffeu);
}

// A packet notice as the kernel writes it, for queue `queue`: the netlink header, nfgenmsg,
// then the NFQA_* attributes put() appends; end() sets the message's length. `off` is the end of
// what was written (more messages may follow there).
struct NfqNotice {
  alignas(8) unsigned char buf[256] = {};
  size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg));
  explicit NfqNotice(uint16_t queue) {
    hdr()->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | 0;
    reinterpret_cast<nfgenmsg*>(NLMSG_DATA(hdr()))->res_id = htons(queue);
  }
  nlmsghdr* hdr() { return reinterpret_cast<nlmsghdr*>(buf); }
  void put(uint16_t type, const void* data, uint16_t len) {
    auto* a = reinterpret_cast<nlattr*>(buf + off);
    a->nla_type = type;
    a->nla_len = NLA_HDRLEN + len;
    std::memcpy(buf + off + NLA_HDRLEN, data, len);
    off += NLA_ALIGN(a->nla_len);
  }
  void end() { hdr()->nlmsg_len = static_cast<uint32_t>(off); }
};

TEST(NfqMessage, ParsesPacketsAndAcks) {
  // PACKET_HDR {id 9, proto, hook}, CAP_LEN 65226 and TIMESTAMP {sec, usec} (both big-endian
  // 64-bit), on queue 12.
  NfqNotice n(12);
  unsigned char ph[7] = {0, 0, 0, 9, 0x08, 0x00, 0};
  n.put(1, ph, 7);  // NFQA_PACKET_HDR
  uint32_t cap = htonl(65226);
  n.put(13, &cap, 4);  // NFQA_CAP_LEN
  uint64_t ts[2] = {htobe64(1'796'000'000), htobe64(123'456)};
  n.put(4, ts, 16);  // NFQA_TIMESTAMP
  n.end();
  auto& buf = n.buf;
  auto& off = n.off;
  // Followed by an ACK (NLMSG_ERROR, error 0) and an EBUSY refusal.
  auto ack = [&](uint32_t seq, int err) {
    auto* e = reinterpret_cast<nlmsghdr*>(buf + off);
    e->nlmsg_type = NLMSG_ERROR;
    e->nlmsg_len = NLMSG_LENGTH(sizeof(nlmsgerr));
    e->nlmsg_seq = seq;
    reinterpret_cast<nlmsgerr*>(NLMSG_DATA(e))->error = -err;
    off += NLMSG_ALIGN(e->nlmsg_len);
  };
  ack(5, 0);
  ack(6, EBUSY);
  std::vector<NlEvent> ev;
  ASSERT_TRUE(parse_events({reinterpret_cast<char*>(buf), off}, ev));
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].kind, NlEvent::Kind::kPacket);
  EXPECT_EQ(ev[0].packet.queue, 12);
  EXPECT_EQ(ev[0].packet.id, 9u);
  EXPECT_EQ(ev[0].packet.len, 65226u);
  EXPECT_EQ(ev[0].packet.stamp_ns, 1'796'000'000'123'456'000);
  EXPECT_EQ(ev[1].kind, NlEvent::Kind::kAck);
  EXPECT_EQ(ev[1].seq, 5u);
  EXPECT_EQ(ev[1].error, 0);
  EXPECT_EQ(ev[2].error, EBUSY);
  ev.clear();
  EXPECT_TRUE(parse_events({reinterpret_cast<char*>(buf), 3}, ev));  // runt: nothing, no crash
  EXPECT_TRUE(ev.empty());
}

// ECN marking (mark_table.h): hand-built IPv4 headers with a correct checksum.
std::vector<uint8_t> ipv4_packet(uint8_t tos, uint8_t ihl = 5, size_t payload = 40) {
  std::vector<uint8_t> p(ihl * 4 + payload, 0);
  p[0] = static_cast<uint8_t>(0x40 | ihl);
  p[1] = tos;
  p[2] = static_cast<uint8_t>(p.size() >> 8);
  p[3] = static_cast<uint8_t>(p.size() & 0xff);
  p[4] = 0x1c, p[5] = 0x46;  // id
  p[6] = 0x40;               // DF
  p[8] = 64;                 // TTL
  p[9] = 6;                  // TCP
  const uint8_t src[4] = {198, 18, 0, 1}, dst[4] = {198, 18, 3, 7};
  std::memcpy(&p[12], src, 4);
  std::memcpy(&p[16], dst, 4);
  for (size_t i = 20; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i * 37);  // options, data
  p[0] = static_cast<uint8_t>(0x40 | ihl);
  const uint16_t sum = ipv4_header_sum(p);  // over a zero checksum field: the checksum itself
  p[10] = static_cast<uint8_t>(sum >> 8);
  p[11] = static_cast<uint8_t>(sum & 0xff);
  return p;
}

TEST(EcnMark, CeRewriteKeepsTheHeaderChecksumValid) {
  // DSCP values with each ECT codepoint, with and without IP options.
  for (uint8_t dscp : {0, 10, 46, 63})
    for (uint8_t ect : {1, 2})
      for (uint8_t ihl : {5, 6, 15}) {
        auto p = ipv4_packet(static_cast<uint8_t>(dscp << 2 | ect), ihl);
        ASSERT_EQ(ipv4_header_sum(p), 0) << "built valid";
        const auto before = p;
        EXPECT_TRUE(is_ect(p));
        ASSERT_TRUE(set_ce(p));
        EXPECT_EQ(ecn_field(p), 3);
        EXPECT_EQ(p[1] >> 2, dscp) << "DSCP kept";
        EXPECT_EQ(ipv4_header_sum(p), 0) << "checksum after CE, dscp " << int(dscp) << " ect "
                                         << int(ect) << " ihl " << int(ihl);
        // The incremental checksum equals the one computed in full, and only bytes 1, 10 and 11
        // changed (the TCP checksum does not cover the TOS byte).
        auto full = p;
        full[10] = full[11] = 0;
        const uint16_t sum = ipv4_header_sum(full);
        EXPECT_EQ(p[10], sum >> 8);
        EXPECT_EQ(p[11], sum & 0xff);
        for (size_t i = 0; i < p.size(); ++i) {
          if (i == 1 || i == 10 || i == 11) continue;
          EXPECT_EQ(p[i], before[i]) << "byte " << i;
        }
      }
  // Not-ECT is never marked, CE stays as it is, a non-IPv4 or short buffer is left alone.
  auto not_ect = ipv4_packet(0x28);
  EXPECT_FALSE(is_ect(not_ect));
  EXPECT_FALSE(set_ce(not_ect));
  EXPECT_EQ(not_ect, ipv4_packet(0x28));
  auto ce = ipv4_packet(0x03);
  EXPECT_FALSE(set_ce(ce));
  std::vector<uint8_t> v6(40, 0);
  v6[0] = 0x60;
  EXPECT_EQ(ecn_field(v6), -1);
  EXPECT_FALSE(set_ce(v6));
  std::vector<uint8_t> runt = {0x45, 0x02, 0, 10};
  EXPECT_EQ(ecn_field(runt), -1);
}

// A header whose checksum word is at the 0xffff/0x0000 edge: the one's-complement sum of RFC
// 1624 (not RFC 1141's) gives the checksum a full recomputation gives.
TEST(EcnMark, ChecksumEdgeCases) {
  std::mt19937 rng(7);
  int checked = 0;
  for (int i = 0; i < 20000; ++i) {
    auto p = ipv4_packet(static_cast<uint8_t>((rng() & 0xfc) | (1 + (rng() & 1))));
    for (int k : {4, 5, 8, 12, 13, 14, 15, 16, 17, 18, 19}) p[k] = static_cast<uint8_t>(rng());
    p[10] = p[11] = 0;
    const uint16_t sum = ipv4_header_sum(p);
    p[10] = static_cast<uint8_t>(sum >> 8);
    p[11] = static_cast<uint8_t>(sum & 0xff);
    ASSERT_TRUE(set_ce(p));
    ASSERT_EQ(ipv4_header_sum(p), 0) << i;
    ++checked;
  }
  EXPECT_EQ(checked, 20000);
}

TEST(EcnMark, ProbabilityFollowsTheBacklog) {
  // DCQCN's curve: 0 to kmin, pmax x (b - kmin) / (kmax - kmin) up to kmax, 1 above.
  EXPECT_EQ(mark_probability(0, 3000, 6000, 0.01), 0u);
  EXPECT_EQ(mark_probability(3000, 3000, 6000, 0.01), 0u);
  EXPECT_NEAR(mark_probability(4500, 3000, 6000, 0.01) / 4294967296.0, 0.005, 1e-9);
  EXPECT_NEAR(mark_probability(6000, 3000, 6000, 0.01) / 4294967296.0, 0.01, 1e-9);
  EXPECT_EQ(mark_probability(6001, 3000, 6000, 0.01), kMarkAlways);
  EXPECT_EQ(mark_probability(5000, 3000, 6000, 1.0) < kMarkAlways, true);
  // The draw: 0 never marks, kMarkAlways always, p about p of the time.
  std::mt19937 rng(1);
  int hits = 0;
  const uint32_t p = mark_probability(4500, 3000, 6000, 0.5);  // 0.25
  for (int i = 0; i < 100000; ++i) {
    EXPECT_FALSE(marks(0, static_cast<uint32_t>(rng())));
    EXPECT_TRUE(marks(kMarkAlways, static_cast<uint32_t>(rng())));
    hits += marks(p, static_cast<uint32_t>(rng()));
  }
  EXPECT_NEAR(hits / 100000.0, 0.25, 0.01);
}

TEST(EcnMark, TableIsSharedBetweenMappings) {
  const std::string path = ::testing::TempDir() + "/tb-mark-table-" + std::to_string(::getpid());
  std::filesystem::remove(path);
  {
    auto agent = MarkTable::open(path);
    ASSERT_TRUE(agent) << agent.error().message;
    auto stage = MarkTable::open(path);  // the second opener finds it sized and stamped
    ASSERT_TRUE(stage) << stage.error().message;
    agent->set_probability(3, kMarkAlways);
    EXPECT_EQ(stage->probability(3), kMarkAlways);
    EXPECT_EQ(stage->probability(4), 0u);
    stage->count(3, true, true);
    stage->count(3, true, false);
    stage->count(3, false, false);
    const MarkCounts c = agent->counts(3);
    EXPECT_EQ(c.ect, 2u);
    EXPECT_EQ(c.ce, 1u);
    EXPECT_EQ(c.not_ect, 1u);
    // Out of range: read as nothing, never written.
    agent->set_probability(-1, 5);
    agent->set_probability(static_cast<int>(kMarkSlots), 5);
    EXPECT_EQ(agent->probability(static_cast<int>(kMarkSlots)), 0u);
  }
  // A file that is not a mark table is refused.
  std::filesystem::remove(path);
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("not a mark table, just some text of sufficient length", f);
    std::fclose(f);
  }
  auto bad = MarkTable::open(path);
  EXPECT_FALSE(bad);
  std::filesystem::remove(path);
}

TEST(NfqMessage, MarkingQueueCopiesWholePacketsWithoutGso) {
  NlBuffer b;
  append_bind(b, 10, 1024, false, 1, /*whole=*/true);
  const auto attrs = config_attrs(b);
  ASSERT_EQ(attrs.size(), 5u);
  EXPECT_EQ(attrs[1].second, (std::vector<uint8_t>{0, 0, 0xff, 0xff, 2}));  // whole, COPY_PACKET
  EXPECT_EQ(attrs[3].second, (std::vector<uint8_t>{0, 0, 0, 0}));           // no GSO
  // A verdict that carries the packet back: VERDICT_HDR then PAYLOAD with its bytes.
  NlBuffer v;
  auto pkt = ipv4_packet(0x02);
  append_verdict_payload(v, 10, 99, NF_ACCEPT, pkt);
  const nlmsghdr* h = header(v);
  EXPECT_EQ(h->nlmsg_len, v.size());
  EXPECT_EQ(h->nlmsg_type, (NFNL_SUBSYS_QUEUE << 8) | 1);  // NFQNL_MSG_VERDICT
  size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg));
  const auto* vh = reinterpret_cast<const nlattr*>(v.data() + off);
  EXPECT_EQ(vh->nla_type, 2);  // NFQA_VERDICT_HDR
  off += NLA_ALIGN(vh->nla_len);
  const auto* pa = reinterpret_cast<const nlattr*>(v.data() + off);
  EXPECT_EQ(pa->nla_type, 10);  // NFQA_PAYLOAD
  ASSERT_EQ(pa->nla_len, NLA_HDRLEN + pkt.size());
  EXPECT_EQ(std::memcmp(v.data() + off + NLA_HDRLEN, pkt.data(), pkt.size()), 0);
  // Verdicts chain after it.
  const size_t first_len = NLMSG_ALIGN(h->nlmsg_len);
  append_verdict_batch(v, 10, 120, NF_ACCEPT);
  EXPECT_EQ(reinterpret_cast<const nlmsghdr*>(v.data() + first_len)->nlmsg_type,
            (NFNL_SUBSYS_QUEUE << 8) | 3);
}

TEST(NfqMessage, ParsesAWholePacketsPayload) {
  NfqNotice n(0);
  unsigned char ph[7] = {0, 0, 0, 4, 0x08, 0x00, 0};
  n.put(1, ph, 7);
  auto pkt = ipv4_packet(0x01, 5, 60);
  n.put(10, pkt.data(), static_cast<uint16_t>(pkt.size()));  // NFQA_PAYLOAD, no CAP_LEN
  n.end();
  std::vector<NlEvent> ev;
  ASSERT_TRUE(parse_events({reinterpret_cast<char*>(n.buf), n.off}, ev));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].packet.len, pkt.size());  // the whole packet came: its length is the copy's
  ASSERT_EQ(ev[0].packet.payload.size(), pkt.size());
  EXPECT_TRUE(is_ect(ev[0].packet.payload));
}

TEST(StageStats, ProcFileAndDocument) {
  auto k = parse_proc_nfqueue(
      "   10  12345     3 2 65535     7     2       99  1\n"
      "   11      0     0 2     1     0     0        0  1\nnot a line\n");
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[10].total, 3u);
  EXPECT_EQ(k[10].dropped, 7u);
  EXPECT_EQ(k[10].user_dropped, 2u);
  std::map<uint16_t, DelayLine> lines;
  lines.emplace(10, DelayLine({10, Duration{kMs}, Duration{0}, 1024}, 1));
  lines.at(10).admit(1, 1500, 0);
  lines.at(10).admit(2, 500, 0);
  lines.at(10).release_due(kMs + 4000);
  ProcessStats p{42, 1.0, 0.001, 0.003, 1, ""};
  auto j = stats_json(lines, k, p);
  EXPECT_EQ(j["packets"], 2);
  EXPECT_EQ(j["bytes"], 2000);
  EXPECT_DOUBLE_EQ(j["cpu_us_per_packet"].get<double>(), 2000.0);
  EXPECT_EQ(j["reloads"], 1);
  const auto& q = j["queues"][0];
  EXPECT_EQ(q["num"], 10);
  EXPECT_DOUBLE_EQ(q["delay_us"].get<double>(), 1000.0);
  EXPECT_DOUBLE_EQ(q["late_mean_us"].get<double>(), 4.0);
  EXPECT_EQ(q["held"], 0);
  EXPECT_EQ(q["held_max"], 2);
  EXPECT_EQ(q["kernel_dropped"], 7);
}

TEST(NetfilterRules, Texts) {
  EXPECT_EQ(loss_ppm(20), 200000u);
  EXPECT_EQ(loss_ppm(0.015), 150u);
  EXPECT_EQ(loss_ppm(150), 1000000u);
  EXPECT_EQ(loss_ppm(-1), 0u);
  auto args = queue_rule_args({"vb", 10}, "testbedctl lab=x ", true);
  std::string joined;
  for (const auto& a : args) joined += a + "|";
  EXPECT_EQ(joined,
            "-w|5|-t|mangle|-A|PREROUTING|-i|vb|-m|comment|--comment|testbedctl lab=x |-j|"
            "NFQUEUE|--queue-num|10|");
  EXPECT_EQ(joined.find("bypass"), std::string::npos);  // fail-closed
  joined.clear();
  for (const auto& a : probe_rule_args(65535, 0x74620001, "tb-delayd release probe", true))
    joined += a + "|";
  EXPECT_EQ(joined,
            "-w|5|-t|mangle|-A|POSTROUTING|-o|lo|-m|mark|--mark|0x74620001|-m|comment|--comment|"
            "tb-delayd release probe|-j|NFQUEUE|--queue-num|65535|");
  EXPECT_EQ(loss_rule_script({"vb", 200000}, "m1"),
            "add table inet tb_loss; add chain inet tb_loss prerouting { type filter hook "
            "prerouting priority raw; policy accept; }; add rule inet tb_loss prerouting iif "
            "\"vb\" numgen random mod 1000000 < 200000 counter drop comment \"m1\"");
  EXPECT_EQ(loss_rule_script({"vb", 1000000}, "m1")
                .substr(loss_rule_script({"vb", 1000000}, "m1").find("add rule")),
            "add rule inet tb_loss prerouting iif \"vb\" counter drop comment \"m1\"");
  EXPECT_TRUE(check_marker("testbedctl lab=x "));
  EXPECT_FALSE(check_marker(""));
  EXPECT_FALSE(check_marker("a\"b"));
  EXPECT_FALSE(check_marker(std::string(121, 'm')));
}

TEST(NetfilterRules, OneTransactionPerNamespace) {
  // iptables-restore input: queue_rule_args' words, comments quoted, no --queue-bypass.
  EXPECT_EQ(queue_restore_script(
                {{{"vb", 10}, "tb lab=x vb queue"}, {{"vc", 11, true}, "tb lab=x vc queue"}}),
            "*mangle\n"
            "-A PREROUTING -i vb -m comment --comment \"tb lab=x vb queue\" -j NFQUEUE "
            "--queue-num 10\n"
            "-A POSTROUTING -o vc -m comment --comment \"tb lab=x vc queue\" -j NFQUEUE "
            "--queue-num 11\n"
            "COMMIT\n");
  EXPECT_EQ(queue_restore_script({{{"vb", 1}, "m"}}).find("bypass"), std::string::npos);
  // nft -f input: each table and chain once, before the rules; ppm 0 adds nothing.
  EXPECT_EQ(loss_rules_script({{{"va", 200000}, "m1"},
                               {{"vb", 0}, "m0"},
                               {{"vc", 1000000}, "m2"},
                               {{"vd", 50, true}, "m3"},
                               {{"ve", 10, false, true}, "m4"}}),
            "add table inet tb_loss\n"
            "add chain inet tb_loss prerouting { type filter hook prerouting priority raw; "
            "policy accept; }\n"
            "add chain inet tb_loss postrouting { type filter hook postrouting priority raw; "
            "policy accept; }\n"
            "add table bridge tb_loss\n"
            "add chain bridge tb_loss prerouting { type filter hook prerouting priority -300; "
            "policy accept; }\n"
            "add rule inet tb_loss prerouting iif \"va\" numgen random mod 1000000 < 200000 "
            "counter drop comment \"m1\"\n"
            "add rule inet tb_loss prerouting iif \"vc\" counter drop comment \"m2\"\n"
            "add rule inet tb_loss postrouting oif \"vd\" numgen random mod 1000000 < 50 "
            "counter drop comment \"m3\"\n"
            "add rule bridge tb_loss prerouting iif \"ve\" numgen random mod 1000000 < 10 "
            "counter drop comment \"m4\"\n");
  EXPECT_EQ(loss_rules_script({{{"va", 0}, "m"}}), "");
  EXPECT_EQ(loss_rules_script({}), "");
  // Bad input is refused before any tool runs (no namespace is named: none is entered).
  EXPECT_FALSE(add_rules(NetnsRules{"", {{{"vb", 1}, "a\"b"}}, {}}));
  EXPECT_FALSE(add_rules(NetnsRules{"", {}, {{{"vb", 2000000}, "m"}}}));
  EXPECT_FALSE(add_rules(NetnsRules{"", {}, {{{"vb", 10, true, true}, "m"}}}));
  EXPECT_TRUE(add_rules(std::vector<NetnsRules>{}, 4));
}

TEST(NetfilterRules, FindsMarkedRules) {
  auto ipt = parse_iptables_rules(
      "-P PREROUTING ACCEPT\n"
      "-A PREROUTING -i vb -m comment --comment \"tb lab=a link=1\" -j NFQUEUE --queue-num 10\n"
      "-A PREROUTING -i vc -m comment --comment \"tb lab=ab\" -j NFQUEUE --queue-num 11\n"
      "-A PREROUTING -i vd -m comment --comment \"tb lab=a \\\"q\\\"\" -j ACCEPT\n",
      "tb lab=a ");
  ASSERT_EQ(ipt.size(), 1u);
  EXPECT_EQ(ipt[0].ifname, "vb");
  EXPECT_EQ(ipt[0].queue, 10);
  EXPECT_EQ(ipt[0].comment, "tb lab=a link=1");
  EXPECT_EQ(ipt[0].iptables.size(), 12u);
  auto nft = parse_nft_rules(
      R"({"nftables": [{"metainfo": {"version": "1.0.6"}}, {"chain": {"name": "prerouting"}},
      {"rule": {"handle": 2, "comment": "tb lab=a link=1", "expr": [
        {"match": {"op": "==", "left": {"meta": {"key": "iif"}}, "right": "va"}},
        {"match": {"op": "<", "left": {"numgen": {"mode": "random", "mod": 10000}}, "right": 2000}},
        {"counter": {"packets": 0, "bytes": 0}}, {"drop": null}]}},
      {"rule": {"handle": 3, "comment": "other", "expr": []}}]})",
      "tb lab=a ");
  ASSERT_TRUE(nft) << nft.error().message;
  ASSERT_EQ(nft->size(), 1u);
  EXPECT_EQ((*nft)[0].handle, 2u);
  EXPECT_EQ((*nft)[0].ifname, "va");
  EXPECT_EQ((*nft)[0].ppm, 200000u);  // 2000 of 10000, as rules were written before
  EXPECT_FALSE(parse_nft_rules("Error: nope", "tb"));
}

}  // namespace
}  // namespace tb::stage
