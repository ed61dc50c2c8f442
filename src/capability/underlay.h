// Whether this machine can be one [[host]] of a lab over several hosts (issue 19), checked in
// the namespace testbedctl runs in (the host's underlay) before `up --host` builds anything:
// the host's own underlay address is on one of its interfaces (so this is that host), and the
// kernel has a route to every other host's underlay address (so its tunnels can reach them).
// A route is not a proof that the peer answers; it rules out a typo or an unplugged underlay.
// And the underlay carries the tunnels' packets whole: a VXLAN packet is its link's MTU (the
// tunnel's MTU plus 50 bytes of encapsulation), and the route to the peer (its mtu metric, else
// its output devices' MTU) must take that size, else `up` refuses (exit 2) naming the link, its
// profile's MTU, the device and its MTU. Without the check a 4200-byte rail over a 1500-byte
// underlay came up and lost what it should carry (docs/usage.md, "The underlay's MTU").
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
  int mtu_needed = 0;   // the largest VXLAN packet toward this host (0: no tunnel to it)
  std::string mtu_for;  // the link that needs it, for the message ("link A <-> B (profile ...)")
};

// Exit code 2 naming the host, the address and what to do when this machine lacks `local`, any
// peer has no route, or a peer's route is narrower than its mtu_needed; other failures
// (netlink) as they come.
Status check_underlay(const std::string& host, Ipv4 local, const std::vector<UnderlayPeer>& peers);

}  // namespace tb::capability
