// Hosts files: each namespace gets its own view of the lab's names, so a name resolves to the
// address that takes the intended tier from where you stand:
//   GPU -> GPU in the same server      NVLink address   (also NAME.nvl)
//   within a region's rail fabric      rail address     (also NAME.rail)
//   anything else reachable            frontend address (GPU: its NVLink address, routed
//                                      host -> VPC -> transit router -> WAN)
// Names are node names with '/' replaced by '-' ("hz-s0-g3"). Pure; thread-safe.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "plan/op.h"
#include "plan/topology.h"

namespace tb::plan {

// `wan_adjacent` holds (region, region) pairs joined by a WAN link, both orders.
std::vector<WriteHosts> hosts_files(
    const std::string& lab, const Topology& topo,
    const std::set<std::pair<std::string, std::string>>& wan_adjacent);

}  // namespace tb::plan
