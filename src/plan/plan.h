// plan::compile: a pure function from a Scenario to a Plan (topology + ordered ops).
// No system calls; the same scenario always gives the same names, addresses and order.
//
// Address plan (per region, from the lab's address space, in order):
//   rail block: one prefix per rail; ToR a = .1, ToR b = .2, spines get .3.., GPU of server s
//     = .(8+s)/32 on its rail port(s) (unnumbered: /32 on the port, onlink routes);
//   frontend block: VPC subnet (gateway .1, server s = .(2+s)), one NVLink subnet per server
//     (host = .1, GPU j = .(2+j));
//   WAN /31s come from a lab-wide block after the regions.
//
// Thread-safe (pure).
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "plan/host.h"
#include "plan/op.h"
#include "plan/topology.h"
#include "scenario/model.h"

namespace tb::plan {

// One queue of a userspace delay stage: one link direction's delay and jitter.
struct StageQueue {
  uint16_t queue = 0;  // NFQUEUE number, unique within the stage's namespace
  Duration delay;
  Duration jitter;
  uint32_t maxlen = 1024;
  std::string link;  // "hz/tr:ec -> bj/tr:ec", for reports
};

// A delay stage process (tb-delayd) serving every queue of one namespace.
struct Stage {
  std::string netns;
  std::string node;
  std::vector<StageQueue> queues;
};

// One WAN path a failover agent watches ([failover] mode = "agent"): probes leave `dev` for
// `peer`; when they go unanswered, the routes to `dsts` via `peer` at `metric` are withdrawn.
struct AgentPath {
  std::string name, dev;
  Ipv4 peer;
  std::vector<Prefix> dsts;
  int metric = 0;
};

// The failover agent of one transit router (`tb-probe agent`, under the lab's supervisor).
struct Agent {
  std::string netns, node;
  uint16_t port = 7900;
  int64_t interval_ns = 10'000'000;
  int misses = 3;
  std::vector<AgentPath> paths;
};

// A BGP neighbor of a transit router across one WAN link.
struct BgpNeighbor {
  std::string wan;  // the link's name ("ec")
  Ipv4 addr;        // the peer's address on it
  uint32_t asn = 0;
  int local_pref = 100;  // primary links are preferred
};

// The routing daemons of one transit router ([failover] mode = "bfd"): FRR's zebra, bgpd and
// bfdd under the lab's supervisor, eBGP to the peer routers, BFD on every session.
struct Router {
  std::string netns, node;
  uint32_t asn = 0;
  Ipv4 router_id;
  std::vector<Prefix> networks;  // what it announces: its region's frontend block
  std::vector<BgpNeighbor> neighbors;
  int bfd_interval_ms = 300;
  int bfd_multiplier = 3;
};

// Dual-ToR host-route withdrawal ([failover] host_routes = "withdraw"), one agent per region
// with dual ToRs and spines (`tb-probe fabric`, under the lab's supervisor, in the first spine's
// namespace). It watches each GPU port of the region's ToRs and, while a GPU is reachable
// through only some of its ToRs, puts that GPU's /32 on every spine via those ToRs alone; when
// every port forwards again it takes the /32 away (the rail subnet's ECMP route is left).
struct FabricTor {
  std::string node, netns;
  std::string spine_port;  // the spines' interface toward this ToR ("t0a"), the same on each
  Ipv4 addr;               // its rail address, the spines' onlink next hop
};
struct FabricPort {
  int tor = 0;       // index into FabricAgent::tors
  std::string port;  // the ToR's interface to the GPU ("s0g0")
};
struct FabricGpu {
  std::string node;
  Ipv4 addr;  // the GPU's rail address (/32)
  std::vector<FabricPort> ports;
};
struct FabricAgent {
  std::string region, netns;  // netns: where it runs (the first spine's)
  std::vector<std::string> spine_nodes, spine_netns;
  std::vector<FabricTor> tors;
  std::vector<FabricGpu> gpus;
};

struct Plan {
  std::string lab;
  Topology topo;
  std::vector<Op> ops;
  std::string shaping;                  // backend kind ("netem", "tbf", "htb"), "" = links unshaped
  std::string shaping_how;  // how it was chosen: "probed", "asked", "assumed (not root: ...)"
  std::vector<Stage> stages;            // userspace delay stages `up` starts under its supervisor
  std::string failover = "link-state";  // [failover] mode
  std::vector<Agent> agents;        // failover agents `up` starts under its supervisor (mode agent)
  std::vector<Router> routers;      // routing daemons `up` starts under its supervisor (mode bfd)
  std::vector<FabricAgent> fabric;  // dual-ToR host-route agents (host_routes = "withdraw")
};

Result<Plan> compile(const scenario::Scenario& s);

// The dry-run text `testbedctl plan` prints: a header, then one op per line.
std::string to_text(const Plan& p);

// The owner marker every object of lab `lab` carries (prefix of aliases and hosts files).
std::string owner_marker(const std::string& lab);

// The marker of the stage rules on `ifname` (egress or ingress); the kernel appends " queue" and
// " loss" (op.h AddStageRule). Shared by the planner and `link set`, which must find them.
std::string stage_rule_marker(const std::string& lab, const std::string& ifname, bool egress);

}  // namespace tb::plan
