// What `verify` measures and where: link classes (tier + profile, one representative link
// each), the link `--link A B` names, the address a probe is sent to, and the TCP buffer a
// transfer over the link needs. Pure functions of the lab's topology (plus, for the server's
// interface, the interfaces the kernel reports in B's namespace); thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "apply/kernel.h"
#include "core/error.h"
#include "plan/topology.h"

namespace tb::verify {

// Links alike in tier and profile; `link` is the first of them in topology order.
struct LinkClass {
  plan::Tier tier = plan::Tier::kScaleUp;
  std::string profile;
  size_t link = 0;
  int members = 0;
  // A lab over several hosts ([[host]]; both "" on one host): the host whose testbedctl runs the
  // probes' clients, A's end of `link` (the whole measurement when B is there too), and the host
  // that runs `tb-probe serve` at B's end when that is another (a VXLAN tunnel; "" otherwise).
  std::string host;
  std::string serve_host;
  std::string name() const;  // "scale-out/hpn"
  bool crosses() const { return !serve_host.empty(); }
  // "on host a" or "a -> b (a VXLAN tunnel)"; "" on one host.
  std::string where() const;
};

// One class per tier + profile, in topology order. On a lab over several hosts every host gets
// the same answer: the representative is the first link of the class with both ends on one host
// (that host measures it), else the class's first link, which crosses hosts (A's host runs the
// clients, B's the server at its end, over the tunnel).
std::vector<LinkClass> link_classes(const plan::Topology& t);

// "NODE[:IFNAME]" as typed after --link; NODE in slash or hyphen form.
struct Endpoint {
  std::string node;
  std::string ifname;  // empty = any of the node's ports
};
Endpoint parse_endpoint(std::string_view text);

// The one link joining the two endpoints, in either order. Bad input (exit 2) when a node is
// unknown, no link joins them, or several do (the error lists them as NODE:IFNAME pairs).
Result<size_t> find_link(const plan::Topology& t, const Endpoint& x, const Endpoint& y);
// The class of link `i` (members counted over the whole topology), `i` its representative, the
// hosts set as link_classes does.
LinkClass class_of(const plan::Topology& t, size_t i);

// Where the probes go. They always run from the link's `a` end (which carries an address in
// every plan) to its `b` end, sent through A's port on the link with SO_BINDTODEVICE.
struct ProbeTarget {
  std::string a_netns, a_dev;
  Ipv4 a_addr;
  std::string b_netns;
  Ipv4 addr;               // what the probes are sent to
  std::string server_dev;  // the interface in B that holds `addr` (the server binds to it)
  std::string why;         // how `addr` was chosen, in words
};

// A's half of link `l`'s target (a_netns, a_dev, a_addr) and B's namespace; the address, the
// server's interface and `why` are left to the caller. An unknown node or an A port without an
// address is an error naming the link.
Result<ProbeTarget> a_side_target(const plan::Topology& t, const plan::Link& l);

// B's address on the link; when B's port has none (a port of a bridge: NVSwitch, VPC
// switch), B's address on that bridge, i.e. the one of B's addresses in the same subnet as
// A's. `b_ifaces` (B's interfaces as the kernel reports them) picks the server's interface:
// B's port when it holds the address, else whichever interface does (the bridge).
Result<ProbeTarget> probe_target(const plan::Topology& t, const plan::Link& l,
                                 const std::vector<apply::IfaceInfo>& b_ifaces);

// SO_SNDBUF/SO_RCVBUF for a transfer over a link: twice the bandwidth-delay product (research/
// limits.md 4b) over a round trip of 2 x delay + 2 ms for queueing and scheduling, at the
// configured rate (the host's ~20 Gbit/s when the link is not rate-limited); at least 256 KiB
// (below ~8 Mbit/s, what the rate carries in 0.25 s, at least 16 KiB: a slow link's transfer
// would otherwise wait seconds for a queue to drain), at most 256 MiB.
uint64_t tcp_buffer_bytes(Rate rate, Duration delay);

}  // namespace tb::verify
