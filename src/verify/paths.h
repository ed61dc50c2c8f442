// Whole paths for `verify --paths` (issue 13): one pair of nodes per path class (GPU<->GPU in a
// server, on the same rail, across rails, across regions; server<->server over the VPC and
// across regions; to and from the transit router), the links a packet crosses between them,
// what the path's round trip should be (the one-way delays in force on every hop out and back)
// and how far off it may be (the sum of the hops' tolerances, verify/tolerance.h), and the
// verdict on a measured round trip.
//
// The path is the one the kernel takes now: walk_path follows the route lookup in each
// namespace (RTM_GETROUTE fibmatch, the lookup is a parameter so the walk is unit-tested
// without root) and crosses bridges by the frame's next L3 hop (the gateway, else the
// destination). Where a route has several next hops (ECMP, dual ToR) the walk follows the
// first and notes that the others exist; their delays must agree or the note says so.
// Pure except live_route_lookup; thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ipv4.h"
#include "core/units.h"
#include "plan/topology.h"
#include "probe/rtt.h"
#include "verify/tolerance.h"

namespace tb::verify {

inline constexpr int kMaxPathHops = 32;

// One pair to probe: from `from` to `to`'s address `addr` (the one plan::reach picks, as the
// hosts files and collectives use), named by its class.
struct PathPair {
  std::string cls;  // "gpu-gpu in a server", "server-server (vpc)", ...
  std::string from, to;
  Ipv4 addr;
  std::string label;  // reach's label: "nvl", "rail", "fe"
};

// One pair per class the topology has, the first of each in topology order.
std::vector<PathPair> path_pairs(const plan::Topology& t);

// Candidate bulk flows for `verify --under-load`, per region: every GPU to the GPU of the next
// server on its rail (the rail fabric), every GPU to the next GPU of its server (NVLink), every
// server to the next server (the VPC). The caller drops those whose path shares a link with a
// probed path, so the probes measure the emulation under a busy host, not a queue behind bulk
// traffic on their own links.
std::vector<PathPair> load_pairs(const plan::Topology& t);

// One next hop of a route: the output interface (by name) and the gateway, if any.
struct NextHop {
  std::string ifname;
  std::optional<Ipv4> via;
};
struct RouteAnswer {
  std::vector<NextHop> hops;    // the kernel's order; several = multipath
  std::optional<Ipv4> prefsrc;  // RTA_PREFSRC
};
using RouteLookup = std::function<Result<RouteAnswer>(const plan::Node& at, Ipv4 dst)>;
// A link's figures in force (lab overrides applied).
using FiguresOf = std::function<plan::EmulatedFigures(size_t link)>;

struct PathHop {
  size_t link = 0;
  std::string from, from_if, to, to_if;  // the direction crossed
  Duration delay, jitter;                // in force on the link
  Duration tolerance;                    // delay_tolerance(delay)
};

struct Path {
  std::vector<PathHop> hops;
  std::vector<std::string> notes;  // multipath, ...
  Duration delay() const;          // sum of the hops' delays
  Duration tolerance() const;      // sum of the hops' tolerances
  Duration jitter_sigma() const;   // sqrt of the sum of the hops' jitter variances
  std::string text() const;        // "dc/s0:fe -> dc/vpc:s0 (250us) | ..."
};

// The links a packet from `from` to `dst` crosses, following `lookup` in every namespace.
Result<Path> walk_path(const plan::Topology& t, const std::string& from, Ipv4 dst,
                       const RouteLookup& lookup, const FiguresOf& figures);

// The address a packet from `from` to `dst` leaves with: the route's prefsrc, else the address
// of the first hop's interface (the node's address in the subnet of the next L3 hop).
Result<Ipv4> source_address(const plan::Topology& t, const std::string& from, Ipv4 dst,
                            const RouteLookup& lookup);

// The kernel's answer in the node's namespace (needs root).
Result<RouteAnswer> live_route_lookup(const plan::Node& at, Ipv4 dst);

// One path class's figures and verdict. RTT figures are in ms.
struct PathCheck {
  double expected_ms = 0;             // out + back delays in force, + the measured base
  double configured_ms = 0;           // out + back delays in force
  double base_ms = 0;                 // median RTT over lo in the source's namespace
  double tolerance_ms = 0;            // sum of every hop's tolerance, out and back
  std::optional<double> achieved_ms;  // median RTT over the path
  Verdict verdict = Verdict::kNotChecked;
  std::string reason;
  std::string detail;
};

// Judges the median RTT over the path against the out and back paths' delays plus the base.
PathCheck check_path(const Path& out, const Path& back, const std::optional<probe::RttResult>& rtt,
                     const std::optional<probe::RttResult>& base);

}  // namespace tb::verify
