// nf_tables batches of iptables-nft's NFQUEUE rules (declared in netlink/nft_message.h).
#include "netlink/nft_message.h"

#include <arpa/inet.h>
#include <linux/if.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nf_tables_compat.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/x_tables.h>
#include <linux/netfilter/xt_NFQUEUE.h>
#include <linux/netfilter/xt_comment.h>
#include <linux/netfilter_ipv4.h>

#include <cstring>
#include <set>

#include "netlink/message_builder.h"

namespace tb::netlink {
namespace {

constexpr const char* kTable = "mangle";
// iptables-nft's mangle base chains (iptables/nft.c, the "mangle" entry of xtables_ipv4[]):
// type filter, priority NF_IP_PRI_MANGLE (-150), policy accept.
constexpr const char* kChainType = "filter";
// nftables' compat extension revisions iptables-nft 1.8.9 picks on a 6.x kernel (it asks with
// NFNL_MSG_COMPAT_GET for the highest one both know): comment 0, NFQUEUE 3 (xt_NFQ_info_v3).
constexpr uint32_t kCommentRev = 0;
constexpr uint32_t kNfqueueRev = 3;

void put_be32(MessageBuilder& m, uint16_t type, uint32_t v) {
  m.put_u32(type, htonl(v));
}

// The nfgenmsg every nfnetlink message starts with (include/uapi/linux/netfilter/nfnetlink.h).
void put_nfgen(MessageBuilder& m, uint8_t family, uint16_t res_id) {
  auto* g = m.put_extra<nfgenmsg>();
  g->nfgen_family = family;
  g->version = NFNETLINK_V0;
  g->res_id = htons(res_id);
}

uint16_t nft_type(int msg) {
  return static_cast<uint16_t>((NFNL_SUBSYS_NFTABLES << 8) | msg);
}

// One NFTA_LIST_ELEM of a rule's NFTA_RULE_EXPRESSIONS: NFTA_EXPR_NAME, then `data` fills
// NFTA_EXPR_DATA.
template <class Fn>
void put_expr(MessageBuilder& m, const char* name, Fn&& data) {
  nlattr* elem = m.nest_start(NFTA_LIST_ELEM);
  m.put_str(NFTA_EXPR_NAME, name);
  nlattr* d = m.nest_start(NFTA_EXPR_DATA);
  data();
  m.nest_end(d);
  m.nest_end(elem);
}

// meta KEY -> reg 1; cmp reg 1 == value (nftables' way of `-i`, `-o` and `--mark`).
void put_meta_cmp(MessageBuilder& m, uint32_t key, const void* value, size_t len) {
  put_expr(m, "meta", [&] {
    put_be32(m, NFTA_META_KEY, key);
    put_be32(m, NFTA_META_DREG, NFT_REG_1);
  });
  put_expr(m, "cmp", [&] {
    put_be32(m, NFTA_CMP_SREG, NFT_REG_1);
    put_be32(m, NFTA_CMP_OP, NFT_CMP_EQ);
    nlattr* data = m.nest_start(NFTA_CMP_DATA);
    m.put_bytes(NFTA_DATA_VALUE, value, len);
    m.nest_end(data);
  });
}

std::vector<uint8_t> new_table(uint32_t seq) {
  MessageBuilder m(nft_type(NFT_MSG_NEWTABLE), NLM_F_REQUEST | NLM_F_CREATE);
  put_nfgen(m, NFPROTO_IPV4, 0);
  m.put_str(NFTA_TABLE_NAME, kTable);
  NlMsg msg = m.finish();
  msg.header()->nlmsg_seq = seq;
  return std::move(msg.bytes);
}

std::vector<uint8_t> new_chain(const char* chain, uint32_t hook, uint32_t seq) {
  MessageBuilder m(nft_type(NFT_MSG_NEWCHAIN), NLM_F_REQUEST | NLM_F_CREATE);
  put_nfgen(m, NFPROTO_IPV4, 0);
  m.put_str(NFTA_CHAIN_TABLE, kTable);
  m.put_str(NFTA_CHAIN_NAME, chain);
  nlattr* h = m.nest_start(NFTA_CHAIN_HOOK);
  put_be32(m, NFTA_HOOK_HOOKNUM, hook);
  put_be32(m, NFTA_HOOK_PRIORITY, static_cast<uint32_t>(NF_IP_PRI_MANGLE));
  m.nest_end(h);
  put_be32(m, NFTA_CHAIN_POLICY, NF_ACCEPT);
  m.put_str(NFTA_CHAIN_TYPE, kChainType);
  NlMsg msg = m.finish();
  msg.header()->nlmsg_seq = seq;
  return std::move(msg.bytes);
}

std::vector<uint8_t> new_rule(const XtQueueRule& r, const char* chain, uint32_t seq) {
  MessageBuilder m(nft_type(NFT_MSG_NEWRULE), NLM_F_REQUEST | NLM_F_CREATE | NLM_F_APPEND);
  put_nfgen(m, NFPROTO_IPV4, 0);
  m.put_str(NFTA_RULE_TABLE, kTable);
  m.put_str(NFTA_RULE_CHAIN, chain);
  nlattr* exprs = m.nest_start(NFTA_RULE_EXPRESSIONS);
  // -i/-o: the name with its NUL, an exact match (iptables/nft-shared.c add_iniface: a name
  // ending in '+' would compare the prefix only).
  put_meta_cmp(m, r.egress ? NFT_META_OIFNAME : NFT_META_IIFNAME, r.ifname.c_str(),
               r.ifname.size() + 1);
  if (r.mark) {
    // -m mark --mark M: mask 0xffffffff needs no bitwise; the value in host order, as the
    // kernel compares skb->mark (iptables/nft.c's mark match translation).
    const uint32_t mark = *r.mark;
    put_meta_cmp(m, NFT_META_MARK, &mark, sizeof mark);
  }
  put_expr(m, "match", [&] {
    m.put_str(NFTA_MATCH_NAME, "comment");
    put_be32(m, NFTA_MATCH_REV, kCommentRev);
    xt_comment_info info{};
    std::memcpy(info.comment, r.comment.data(), r.comment.size());
    m.put_bytes(NFTA_MATCH_INFO, &info, XT_ALIGN(sizeof info));
  });
  put_expr(m, "counter", [&] {
    const uint64_t zero = 0;
    m.put_bytes(NFTA_COUNTER_BYTES, &zero, sizeof zero);
    m.put_bytes(NFTA_COUNTER_PACKETS, &zero, sizeof zero);
  });
  put_expr(m, "target", [&] {
    m.put_str(NFTA_TARGET_NAME, "NFQUEUE");
    put_be32(m, NFTA_TARGET_REV, kNfqueueRev);
    // No NFQ_FLAG_BYPASS: fail-closed (stage/netfilter_rules.h). The struct is 6 bytes; the
    // kernel takes it padded to XT_ALIGN (8), zeroed.
    uint8_t info[XT_ALIGN(sizeof(xt_NFQ_info_v3))] = {};
    xt_NFQ_info_v3 nfq{};
    nfq.queuenum = r.queue;
    nfq.queues_total = 1;
    std::memcpy(info, &nfq, sizeof nfq);
    m.put_bytes(NFTA_TARGET_INFO, info, sizeof info);
  });
  m.nest_end(exprs);
  // No -p: protocol 0, no inversion (iptables/nft.c add_compat).
  nlattr* compat = m.nest_start(NFTA_RULE_COMPAT);
  put_be32(m, NFTA_RULE_COMPAT_PROTO, 0);
  put_be32(m, NFTA_RULE_COMPAT_FLAGS, 0);
  m.nest_end(compat);
  NlMsg msg = m.finish();
  msg.header()->nlmsg_seq = seq;
  return std::move(msg.bytes);
}

std::vector<uint8_t> batch_marker(int type, uint32_t seq) {
  MessageBuilder m(static_cast<uint16_t>(type), NLM_F_REQUEST);
  put_nfgen(m, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
  NlMsg msg = m.finish();
  msg.header()->nlmsg_seq = seq;
  return std::move(msg.bytes);
}

Status check_rule(const XtQueueRule& r) {
  if (r.ifname.empty() || r.ifname.size() >= IFNAMSIZ || r.ifname.back() == '+' ||
      r.ifname.find('\0') != std::string::npos)
    return bad_input("interface name \"" + r.ifname +
                     "\": must be 1-15 bytes, without NUL and not ending in '+'");
  if (r.comment.empty() || r.comment.size() >= XT_MAX_COMMENT_LEN ||
      r.comment.find('\0') != std::string::npos)
    return bad_input("rule comment must be 1-255 bytes without NUL, got " +
                     std::to_string(r.comment.size()));
  return {};
}

}  // namespace

Result<NftBatch> xt_queue_batch(std::span<const XtQueueRule> rules, uint32_t first_seq) {
  for (const auto& r : rules) TB_TRY(check_rule(r));
  NftBatch b;
  uint32_t seq = first_seq;
  auto add = [&](std::vector<uint8_t> bytes, std::string what) {
    b.bytes.insert(b.bytes.end(), bytes.begin(), bytes.end());
    b.what.push_back(std::move(what));
  };
  add(batch_marker(NFNL_MSG_BATCH_BEGIN, seq++), "begin the nf_tables transaction");
  std::set<std::string> chains;
  for (const auto& r : rules) {
    const char* chain = r.egress ? "POSTROUTING" : "PREROUTING";
    add(new_table(seq++), "add table ip mangle");
    if (chains.insert(chain).second)
      add(new_chain(chain, r.egress ? NF_INET_POST_ROUTING : NF_INET_PRE_ROUTING, seq++),
          std::string("add chain ip mangle ") + chain);
    add(new_rule(r, chain, seq++), std::string("add rule ") + chain + (r.egress ? " -o " : " -i ") +
                                       r.ifname + " ... -j NFQUEUE --queue-num " +
                                       std::to_string(r.queue));
  }
  add(batch_marker(NFNL_MSG_BATCH_END, seq++), "commit the nf_tables transaction");
  return b;
}

}  // namespace tb::netlink
