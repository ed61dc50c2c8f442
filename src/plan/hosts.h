// Hosts files: each namespace gets its own view of the lab's names, so a name resolves to the
// address that takes the intended tier from where you stand:
//   GPU -> GPU in the same server      NVLink address   (also NAME.nvl)
//   within a region's rail fabric      rail address     (also NAME.rail)
//   anything else reachable            frontend address (GPU: its NVLink address, routed
//                                      host -> VPC -> transit router -> WAN)
// Names are node names with '/' replaced by '-' ("hz-s0-g3"). Pure; thread-safe.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "plan/op.h"
#include "plan/topology.h"

namespace tb::plan {

using WanAdjacency = std::set<std::pair<std::string, std::string>>;

// `wan_adjacent` holds (region, region) pairs joined by a WAN link, both orders.
std::vector<WriteHosts> hosts_files(
    const std::string& lab, const Topology& topo,
    const std::set<std::pair<std::string, std::string>>& wan_adjacent);

// The same rule for one pair of nodes, as the hosts files apply it: the address `viewer`
// uses to reach `target` and its label ("nvl", "rail", "fe"), or none when unreachable.
std::optional<std::pair<Prefix, const char*>> reach(const Node& viewer, const Node& target,
                                                    const WanAdjacency& wan_adjacent);

// The regions a WAN link joins, from a built topology (both orders).
WanAdjacency wan_adjacency(const Topology& topo);

}  // namespace tb::plan
