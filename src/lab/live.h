// A live lab's interfaces as the kernel reports them now (names, state, addresses, counters),
// read over netlink without changing anything. `status` shows them next to the plan; `verify`
// finds where to send its probes. Needs root. Not thread-safe (each call opens its own sockets).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "apply/kernel.h"
#include "core/error.h"
#include "plan/topology.h"

namespace tb::lab {

// Namespace -> its interfaces.
using LiveInterfaces = std::map<std::string, std::vector<apply::IfaceInfo>>;

// The interfaces of one namespace.
Result<std::vector<apply::IfaceInfo>> interfaces_in(const std::string& netns);

// Every node's interfaces; a namespace that cannot be read is left out.
LiveInterfaces read_live_interfaces(const plan::Topology& t);

}  // namespace tb::lab
