// nf_tables batches that add iptables rules to table ip mangle exactly as iptables-nft 1.8.9
// sends them (STYLE rule 7: built apart from sending; NlSocket::transact sends one).
//
// iptables-nft keeps iptables' rules in nf_tables, and `iptables -S` (iptables-nft) reads them
// back by recognising its own expression shapes: an interface match is a `meta iifname/oifname`
// load and a `cmp` of the name with its NUL; `-m mark --mark M` a `meta mark` load and a `cmp`;
// other matches and targets are xtables-compat `match`/`target` expressions (nft_compat) that
// carry the xtables extension's info struct. We send the same bytes, so the rules read back,
// and are listed and deleted by the iptables tool, exactly as if iptables-restore had made them.
// tests/unit/nft_message_test.cc compares a batch with the one iptables-restore sent (captured).
//
// The batch: NFNL_MSG_BATCH_BEGIN, then for each rule NEWTABLE ip mangle, NEWCHAIN of its base
// chain the first time the batch names that chain, NEWRULE (append), and NFNL_MSG_BATCH_END.
// Tables and chains go with NLM_F_CREATE and without NLM_F_EXCL, so they are made when missing
// and left as they are otherwise (a NEWCHAIN of an existing base chain with the same type, hook
// and priority is an update: net/netfilter/nf_tables_api.c nf_tables_updchain; it sets the
// policy to ACCEPT, the policy iptables-nft gives a chain it makes). The kernel applies the
// whole batch or none of it (nfnetlink_rcv_batch: one transaction).
//
// Unlike iptables-nft, the begin message carries no NFNL_BATCH_GENID: iptables-nft sends the
// ruleset generation its cache was read at, and the kernel refuses the batch (ERESTART) when the
// ruleset changed since; we read no cache, and every message here is valid in any generation.
//
// Plain values and pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"

namespace tb::netlink {

// One rule of table ip mangle:
//   -A CHAIN -i|-o IFNAME [-m mark --mark MARK] -m comment --comment COMMENT
//      -j NFQUEUE --queue-num QUEUE
// CHAIN is PREROUTING (with -i) or POSTROUTING (with -o, `egress`).
struct XtQueueRule {
  std::string ifname;  // 1-15 bytes, not ending in '+' (iptables' wildcard)
  bool egress = false;
  std::optional<uint32_t> mark;  // -m mark --mark MARK (mask 0xffffffff)
  std::string comment;           // 1-255 bytes
  uint16_t queue = 0;
};

// A batch's bytes, and one line per message naming it for an error ("add table ip mangle", ...).
struct NftBatch {
  std::vector<uint8_t> bytes;
  std::vector<std::string> what;  // begin and end included
};

// Checks every rule (bad input: what is wrong with which), then builds the batch. Sequence
// numbers run from `first_seq` (begin) upwards, one a message; flags are iptables-nft's, without
// NLM_F_ACK (NlSocket::transact adds it and its own sequence numbers).
Result<NftBatch> xt_queue_batch(std::span<const XtQueueRule> rules, uint32_t first_seq = 0);

}  // namespace tb::netlink
