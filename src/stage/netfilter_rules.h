// The netfilter side of the delay stage: the rules that steer a link direction's packets into
// an NFQUEUE queue, and nftables loss rules, inside a named network namespace.
//
// The NFQUEUE rules are iptables rules (table ip mangle) because nft's own `queue` statement
// does not work on our kernels (research/limits.md 4) while iptables-nft's xtables-compat
// NFQUEUE target (nft_compat) does. Adding them is one nf_tables netlink transaction per
// namespace, built with libmnl in iptables-nft's exact encoding (netlink/nft_message.h), so the
// iptables tool lists and deletes them as its own; no process is started (issue 34: a tool run
// cost ~9 ms of CPU a namespace at `up`). Only where `iptables` is iptables-legacy (whose
// rules live in x_tables, out of nf_tables' sight) do they go through iptables-restore.
// Listing and removing rules, and the loss rules (nft's expression compiler lives in the nft
// tool), still run the tools: we spawn them inside /run/netns/NAME (core/spawn.h), bounded by
// a timeout; a refusal returns the tool's stderr. A netlink refusal names the message and
// carries the kernel's errno text and extended ack.
//
// Rules, each tagged with a comment that is the owner marker the caller passes:
//   iptables -t mangle -A PREROUTING -i IFNAME -m comment --comment MARKER
//            -j NFQUEUE --queue-num N
//     deliberately WITHOUT --queue-bypass: with no tb-delayd bound to queue N the kernel drops
//     the packets (fail-closed), so a crashed stage is a dead link, never an undelayed one.
//     PREROUTING of the receiving end's ingress interface covers forwarded and locally
//     delivered traffic alike. IPv4 only (iptables, not ip6tables): labs use 198.18.0.0/15.
//   nft table inet tb_loss, chain prerouting (filter hook, priority raw, -300: drops happen
//   before the packet reaches the queue and costs the stage nothing):
//     iif IFNAME numgen random mod 1000000 < K counter drop comment MARKER
//     K is in parts per million, 0.0001 % steps (research/limits.md 5: numgen loss is unbiased).
//     The kernel takes a modulus up to 2^32 - 1 (nft refuses 2^32: "Numerical result out of
//     range", nft 1.0.6 on 6.18); 10^6 keeps the rule readable. The rule matches what netfilter
//     sees: one GSO/GRO super-packet is one draw, so a bulk TCP flow loses whole super-packets
//     (up to ~45 segments) at once, as netem on a TSO sender does (docs/scenario.md).
//   Where the receiving port is a bridge port (server -> VPC switch, GPU -> NVSwitch) its frames
//   never reach IP, and a rule on the sender's egress (postrouting, oif) drops locally: TCP gets
//   the error back and sends again without a retransmission, a UDP sender gets EPERM. There the
//   loss rule sits in the bridge's namespace instead, on the port, in a `bridge` family table:
//   nft table bridge tb_loss, chain prerouting (filter hook, priority -300):
//     iif IFNAME numgen random mod 1000000 < K counter drop comment MARKER
//   Bridge hooks run without br_netfilter. The frame is lost after it left the sender, as on a
//   wire. (The NFQUEUE rule stays on the sender's egress: nft's queue statement does not work.)
//   A loss change swaps the old rule for the new in one nft transaction (replace_loss_rule), so
//   no packet ever passes with neither rule in force.
//   The stage's release probe (calibration.h), in the stage's own namespace:
//   iptables -t mangle -A POSTROUTING -o lo -m mark --mark kProbeMark -m comment --comment MARKER
//            -j NFQUEUE --queue-num kProbeQueue
//     only the stage's own probes carry that mark, so no other loopback packet is queued; the
//     stage adds it at start and removes it when it stops (a killed stage leaves it, matching
//     nothing, until the namespace goes or the next stage there replaces it).
// A rule belongs to a marker when its comment starts with it (apply/marker.h's rule), so a lab
// marker selects all of a lab's rules and a longer per-link marker selects one link's.
//
// `netns` "" means the caller's own namespace. Thread-safe (each call forks its own child or
// opens its own netlink socket).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "netlink/nft_message.h"

namespace tb::stage {

inline constexpr const char* kLossTable = "tb_loss";
inline constexpr const char* kLossChain = "prerouting";
inline constexpr const char* kLossEgressChain = "postrouting";
// A loss rule drops K of every kLossModulus packets (parts per million).
inline constexpr uint32_t kLossModulus = 1'000'000;

// `egress`: match packets leaving `ifname` (POSTROUTING, -o / oif) instead of arriving on it.
// Needed where the receiving port is a bridge port, whose frames never reach IP.
struct QueueRule {
  std::string ifname;  // interface (iptables -i, or -o with egress)
  uint16_t queue = 0;  // --queue-num
  bool egress = false;
};
// `bridge`: `ifname` is a bridge port and the rule goes in table bridge tb_loss (iif, ingress
// of the port); `egress` and `bridge` are not both set.
struct LossRule {
  std::string ifname;  // interface (nft iif, or oif with egress)
  uint32_t ppm = 0;    // packets dropped out of every kLossModulus (10^6)
  bool egress = false;
  bool bridge = false;
};
// A rule found by marker: kind, what it matches, and how to delete it.
struct MarkedRule {
  enum class Kind { kQueue, kLoss } kind = Kind::kQueue;
  std::string ifname;
  uint16_t queue = 0;  // kQueue
  uint32_t ppm = 0;    // kLoss: parts per million (a rule of another modulus is scaled)
  std::string comment;
  uint64_t handle = 0;                // kLoss: nft rule handle
  std::string chain = kLossChain;     // kLoss: the nft chain it is in
  std::string family = "inet";        // kLoss: the table's family, "inet" or "bridge"
  std::vector<std::string> iptables;  // kQueue: the rule as `iptables -S` prints it, tokenised
};

// 12.34 (%) -> 123400 ppm; rounds to the nearest 0.0001 % step, but a positive loss is never
// rounded away: below 0.00005 % it is 1 ppm. Percent outside [0, 100] is clamped.
uint32_t loss_ppm(double percent);

// A marker must be 1-120 printable characters without '"' or '\\' (it travels inside quoted
// comments; nft keeps at most 128 bytes of comment).
Status check_marker(const std::string& marker);

// A rule and the marker its comment carries.
struct MarkedQueue {
  QueueRule rule;
  std::string marker;
};
struct MarkedLoss {
  LossRule rule;
  std::string marker;
};
// Every rule `up` installs in one namespace.
struct NetnsRules {
  std::string netns;
  std::vector<MarkedQueue> queue;
  std::vector<MarkedLoss> loss;  // ppm 0: none
  // Also the release probe's rule (probe_rule_args) for the stage that will serve `queue`,
  // in the same transaction; that stage runs with --probe-rule-installed. It carries the
  // stage's probe marker, not the lab's: it goes with the namespace.
  bool release_probe = false;
};

// Building and reading the tools' text, apart from running them (unit-tested).
// `iptables-restore --noflush` input adding every rule in `rules` to table mangle (one
// transaction; the same words as queue_rule_args, no --queue-bypass).
// With `probe` (queue, mark, marker), the release probe's rule last.
struct ProbeRule {
  uint16_t queue = 0;
  uint32_t mark = 0;
  std::string marker;
};
std::string queue_restore_script(const std::vector<MarkedQueue>& rules,
                                 const ProbeRule* probe = nullptr);
// The same rules as one nf_tables netlink batch, in iptables-nft's own encoding
// (netlink/nft_message.h): what add_rules sends where iptables is iptables-nft. Bad input (an
// interface name iptables would not take as an exact name) names the rule.
Result<netlink::NftBatch> queue_rules_batch(const std::vector<MarkedQueue>& rules,
                                            const ProbeRule* probe = nullptr,
                                            uint32_t first_seq = 0);
// One nft transaction adding every loss rule with a ppm above 0, with the tables and chains
// they need (idempotent adds), one statement a line. "" when there is none.
std::string loss_rules_script(const std::vector<MarkedLoss>& rules);
std::vector<std::string> queue_rule_args(const QueueRule& rule, const std::string& marker,
                                         bool add);
std::string loss_rule_script(const LossRule& rule, const std::string& marker);
// One nft transaction: adds `rule` (none when its ppm is 0) and deletes `old` (kLoss rules, by
// family, chain and handle). nft applies a script given as one argument as a single batch.
std::string loss_swap_script(const LossRule& rule, const std::string& marker,
                             const std::vector<MarkedRule>& old);
// `iptables -t mangle -S PREROUTING` output -> NFQUEUE rules whose comment carries `marker`.
std::vector<MarkedRule> parse_iptables_rules(const std::string& save_text,
                                             const std::string& marker);
// `nft -j -a list chain inet tb_loss prerouting` output (or bridge's) -> loss rules carrying
// `marker`.
Result<std::vector<MarkedRule>> parse_nft_rules(const std::string& json_text,
                                                const std::string& marker);

// The release probe's rule (above): loopback egress, packets with fwmark `mark` only.
std::vector<std::string> probe_rule_args(uint16_t queue, uint32_t mark, const std::string& marker,
                                         bool add);
// Installs it, first removing one with the same words left by an earlier stage.
Status add_probe_rule(const std::string& netns, uint16_t queue, uint32_t mark,
                      const std::string& marker);
// Removes it; one that is not there is success.
Status remove_probe_rule(const std::string& netns, uint16_t queue, uint32_t mark,
                         const std::string& marker);

// Installs the NFQUEUE rule (no --queue-bypass: fail-closed), the way add_rules does.
Status add_queue_rule(const std::string& netns, const QueueRule& rule, const std::string& marker);
// Removes that exact rule; one that is not there is success.
Status remove_queue_rule(const std::string& netns, const QueueRule& rule,
                         const std::string& marker);
// Installs every rule of `rules.netns`: one nf_tables netlink transaction for the NFQUEUE rules
// (iptables-restore on an iptables-legacy host), one nft for the loss rules, each all or
// nothing. Checks every marker and rule first (bad input: nothing installed).
Status add_rules(const NetnsRules& rules);
// add_rules for every namespace in `all`, at most `parallel` namespaces at once. Every
// namespace is tried; the error is the first failure in `all`'s order (with how many failed).
Status add_rules(const std::vector<NetnsRules>& all, int parallel);
// Installs a loss rule (creating table and chain when missing). ppm == 0 adds nothing.
Status add_loss_rule(const std::string& netns, const LossRule& rule, const std::string& marker);
// Puts `rule` (tagged `marker`) in place of every loss rule in `netns` whose comment is exactly
// one of `replaces`, in one nft transaction: the old rate holds until the new one does. ppm 0
// removes them. Deletes a table tb_loss (inet or bridge) once it holds no rule.
Status replace_loss_rule(const std::string& netns, const LossRule& rule, const std::string& marker,
                         const std::vector<std::string>& replaces);
// Every NFQUEUE and loss rule (inet and bridge tables) in `netns` whose comment starts with
// `marker`.
Result<std::vector<MarkedRule>> list_marked_rules(const std::string& netns,
                                                  const std::string& marker);
// Removes every rule list_marked_rules finds, keeps going past failures (returns the first),
// and deletes a table tb_loss (inet or bridge) once it holds no rule. Nothing marked is success.
Status remove_marked_rules(const std::string& netns, const std::string& marker);

}  // namespace tb::stage
