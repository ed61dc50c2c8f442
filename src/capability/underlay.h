// Whether this machine can be one [[host]] of a lab over several hosts (issue 19), checked in
// the namespace testbedctl runs in (the host's underlay) before `up --host` builds anything:
// the host's own underlay address is on one of its interfaces (so this is that host), and the
// kernel has a route to every other host's underlay address (so its tunnels can reach them).
// A route is not a proof that the peer answers; it rules out a typo or an unplugged underlay.
// Not thread-safe (one netlink socket per call).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/ipv4.h"

namespace tb::capability {

struct UnderlayPeer {
  std::string host;
  Ipv4 addr;
};

// Exit code 2 naming the host, the address and what to do when this machine lacks `local` or
// any peer has no route; other failures (netlink) as they come.
Status check_underlay(const std::string& host, Ipv4 local, const std::vector<UnderlayPeer>& peers);

}  // namespace tb::capability
