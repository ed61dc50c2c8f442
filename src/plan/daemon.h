// The long-running processes a lab needs besides its kernel objects, as plan data: userspace
// delay stages (kernels without netem), failover agents ([failover] mode = "agent"), FRR routers
// (mode = "bfd") and dual-ToR host-route agents (host_routes = "withdraw"). Each is one
// StartDaemon op (op.h); the lab's supervisor runs them (lab/daemons.h turns them into child
// specs and config files). JSON round-trips every field (the journal and plan --format json).
//
// Plain values; thread-safe to copy and read.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "core/ipv4.h"
#include "core/units.h"

namespace tb::plan {

// One queue of a userspace delay stage: one link direction's delay and jitter.
struct StageQueue {
  uint16_t queue = 0;  // NFQUEUE number, unique within the stage's namespace
  Duration delay;
  Duration jitter;
  uint32_t maxlen = 1024;
  std::string link;  // "hz/tr:ec -> bj/tr:ec", for reports
  // ecn: the slot of the switch port upstream in the host's mark table (stage/mark_table.h),
  // whose probability this queue marks ECT packets CE with; -1 = no marking.
  int mark = -1;
};

// A delay stage process (tb-delayd) serving every queue of one namespace.
struct Stage {
  std::string netns;
  std::string node;
  std::vector<StageQueue> queues;
  std::string mark_table;  // the host's mark table when a queue marks ("" = none)
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

// The congestion agent of a lab's host (`tb-probe congestion`, under the lab's supervisor; issue
// 32, docs/design-congestion.md): it polls every non-droptail switch egress queue (`ports`) and,
// for a lossless one past XOFF, pauses the TBFs one hop upstream that feed it (`upstreams`) until
// it drains below XON. Byte thresholds are lab bytes (scaled and floored by the plan).
struct CongestionPort {
  std::string name;  // "dc/tor0:s4g0" (node:ifname), for reports
  std::string netns, ifname;
  uint32_t handle = 0, parent = 0;  // the TBF whose backlog is this queue's
  std::string model;                // "lossless" or "ecn"
  uint64_t xoff = 0, xon = 0;       // lossless: pause above xoff, resume below xon
  uint64_t kmin = 0, kmax = 0;      // ecn: marking thresholds
  double pmax = 0;                  // ecn: marking probability at kmax, 0..1
  std::vector<int> feeders;         // indices into CongestionAgent::upstreams
  int mark_slot = -1;               // ecn: where it publishes its marking probability
  bool red = false;                 // ecn: a RED child of its TBF marks; the agent reads its count
  // Its own TBF as planned (a pfc-storm holds it paused; the figures a killed agent's hold is
  // restored to; 0: not known, e.g. a config written before P8); the pause's burst is one frame.
  uint64_t rate = 0;
  uint32_t burst = 0, limit = 0;
  uint32_t mtu = 1500;
};
struct CongestionUpstream {
  std::string name;  // "dc/s0/g0:rail" (node:ifname), for reports
  std::string netns, ifname;
  uint32_t handle = 0, parent = 0;  // the TBF paused and resumed
  uint64_t rate = 0;                // its TbfOptions in force: bytes per second,
  uint32_t burst = 0, limit = 0;    // bucket and queue bytes
  uint32_t mtu = 1500;              // the pause's one-frame burst
  int64_t quantum_ns = 0;           // a pause not refreshed within it expires (802.1Qbb)
  std::string feeds_ifname;         // the switch port it feeds (in its ports' netns): rx
  int port = -1;                    // its index in ports when it is polled too (hop by hop)
};
struct CongestionAgent {
  std::string netns;                  // where it runs (the first polled switch's)
  int64_t poll_ns = 1'000'000;        // while a queue builds
  int64_t idle_poll_ns = 10'000'000;  // otherwise
  int64_t late_ns = 1'000'000;        // lateness the headroom covers
  int64_t watchdog_ns = 200'000'000;  // a port paused this long with no progress is a storm
  int64_t restore_ns = 200'000'000;   // how long the watchdog then ignores its pauses
  std::string action = "drop";        // "drop" or "forward"
  std::vector<CongestionPort> ports;
  std::vector<CongestionUpstream> upstreams;
  std::string mark_table;  // ecn ports publish their marking probability here ("" = none)
};

using Daemon = std::variant<Stage, Agent, Router, FabricAgent, CongestionAgent>;

// "stage", "agent", "router", "fabric", "congestion".
const char* daemon_kind(const Daemon& d);
// The supervisor child's name, e.g. "stage hz/tr", "agent hz/tr", "fabric hz"; a router runs
// three children ("zebra hz/tr", ...) and is named "frr hz/tr" here.
std::string daemon_name(const Daemon& d);
// One line, the text `testbedctl plan` prints.
std::string daemon_text(const Daemon& d);

nlohmann::json to_json(const Daemon& d);
Result<Daemon> daemon_from_json(const nlohmann::json& j);
nlohmann::json to_json(const Stage& s);
Stage stage_from_json(const nlohmann::json& j);  // throws nlohmann::json::exception
nlohmann::json to_json(const CongestionAgent& c);
CongestionAgent congestion_from_json(const nlohmann::json& j);  // throws nlohmann::json::exception

}  // namespace tb::plan
