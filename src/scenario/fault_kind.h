// The kinds of fault a [[fault]] table (or the `fault` verb) can name, with their name table:
// the name a scenario writes, the name the `fault` verb takes, and what the fault acts on (a
// link between two nodes, two regions, or one node), which decides the keys or arguments it
// takes. The loader, the fault room and the `fault` verb all read this one table.
// Pure data and functions; thread-safe.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/units.h"

namespace tb::scenario {

enum class FaultKind {
  kLinkDown,   // carrier off at both ends of a link (until `for` or a later link-up)
  kLinkUp,     // carrier back on
  kFlap,       // `count` cycles of down for period/2, up for period/2
  kLoss,       // the link's loss set to `loss` %
  kBlackhole,  // everything dropped both ways while the link stays up (gray failure)
  kLatency,    // `delay` added to the link's one-way delay
  kPartition,  // every WAN link between two regions blackholed
  kNodeCrash,  // every link of a ToR, spine, switch, server or router down
  kRankKill,   // SIGKILL to the bench ranks in a GPU's namespace
  kPfcStorm,   // a GPU's NIC keeps pausing the ToR port(s) facing it (lossless rails)
};

// What a fault acts on: the keys (a, b, link | regions | node) or the verb's arguments
// (A B | R1 R2 | NODE) it takes.
enum class FaultTarget { kLink, kRegions, kNode };

struct FaultKindInfo {
  FaultKind kind;
  std::string_view name;       // kind = "..." in a scenario, and in events and reports
  std::string_view verb_name;  // the `fault` verb's KIND ("crash" and "kill" pick node-crash
                               // or rank-kill by the node they are given)
  FaultTarget target;
};

// A flap's cycles: `count` in a [[fault]], the fault verb's --count.
inline constexpr IntRange kFlapCountRange{1, 1000000};

// Every kind, in the order error messages list them.
std::span<const FaultKindInfo> fault_kinds();
const FaultKindInfo& info(FaultKind k);
std::string_view name(FaultKind k);  // "link-down"
std::string to_string(FaultKind k);  // the same, as a string
std::optional<FaultKind> parse_fault_kind(std::string_view name);
// Scenario names of every kind, or of the kinds acting on `target`, in table order.
std::vector<std::string> fault_kind_names();
std::vector<std::string> fault_kind_names(FaultTarget target);
inline bool is_link_kind(FaultKind k) {
  return info(k).target == FaultTarget::kLink;
}

}  // namespace tb::scenario
