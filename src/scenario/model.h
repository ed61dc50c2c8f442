// The scenario model: plain structs describing a cluster the way real ones are described
// (regions, servers, GPUs, fabrics, WAN links, link profiles with real-world figures), plus how
// to scale it down. Produced by scenario::load, consumed by plan::compile.
//
// No Linux headers here. Values are owned; no thread-safety concerns.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/ipv4.h"
#include "core/units.h"
#include "scenario/fault_kind.h"

namespace tb::scenario {

// Where something was written: line and column in Scenario::file (1-based; 0 = not from a file).
struct Loc {
  int line = 0;
  int col = 0;
};

// How a link's switch egress queues behave when more arrives than they send (issue 32,
// docs/design-congestion.md, docs/scenario.md "Congestion"): "droptail" (the bfifo drops what
// does not fit), "lossless" (802.1Qbb PFC: the lab's congestion agent pauses the queues one hop
// upstream while an egress holds more than xoff, until it drains below xon) or "ecn" (ECT packets
// leaving an egress are marked CE with a probability that rises from 0 at kmin to pmax at kmax
// of its backlog, and 1 above kmax, as DCQCN's RED-like marking; the rest tail-drop). Thresholds
// are real-world bytes; the plan scales and floors them (plan/congestion.h). 0 = the default.
struct CongestionSpec {
  std::string model = "droptail";
  bool written = false;   // the profile wrote `congestion` itself (not a preset's default)
  uint64_t xoff = 0;      // pause above this many bytes queued at an egress port
  uint64_t xon = 0;       // resume below this
  uint64_t headroom = 0;  // per ingress: what still arrives after a pause is sent (802.1Qbb)
  uint64_t buffer = 0;    // the port's share of the switch's buffer: its drop point at least
  uint64_t kmin = 0;      // ecn: marking starts above this backlog
  uint64_t kmax = 0;      // ecn: every ECT packet is marked above this
  double pmax_pct = 0;    // ecn: the marking probability at kmax, percent (0 = the default)
  Loc loc;                // where `congestion` was written (the profile's place otherwise)
};

// Real-world figures for one class of link, as a datasheet or paper states them.
struct LinkProfile {
  std::string name;     // the key under [profiles], or the preset's own name
  std::string preset;   // preset it started from ("" = none)
  Rate rate;            // per direction
  Duration delay;       // one-way
  Duration jitter;      // standard deviation of the one-way delay
  double loss_pct = 0;  // random loss, percent, per direction
  int mtu = 1500;
  std::string source;  // where the figures come from (presets cite the publication)
  Loc loc;
  // jitter_mode = "reorder": each packet keeps its own drawn delay and may overtake the ones
  // before it (netem's own behaviour); the default, "ordered", never reorders (docs/scenario.md).
  bool reorder = false;
  CongestionSpec congestion;
};

// The congestion agent's timing ([congestion], docs/scenario.md "Congestion"): how often it
// reads the lossless switch queues while one builds (poll) and otherwise (idle_poll), the
// lateness the headroom covers (late_budget), and the PFC watchdog: a port paused this long
// without sending is a storm (watchdog), whose pauses are then ignored for watchdog_restore
// while its queue drops ("drop") or forwards ("forward") what arrives. Juniper's defaults.
struct Congestion {
  Duration poll{1'000'000};
  Duration idle_poll{10'000'000};
  Duration late_budget{1'000'000};
  Duration watchdog{200'000'000};
  Duration watchdog_restore{200'000'000};
  std::string watchdog_action = "drop";
  Loc loc;
};

// The emulation scale: emulated rate = real rate / bandwidth; emulated delay = real delay * delay;
// a training step's emulated compute time = its real compute time * compute (docs/scenario.md).
struct Scale {
  double bandwidth = 1000;
  double delay = 1;
  double compute = 1;
  Loc loc;
};

// One region: a cluster of identical servers with a rail-optimized scale-out fabric,
// a frontend VPC network and a transit router towards the WAN.
struct Region {
  std::string name;         // [a-z][a-z0-9]{0,5}, e.g. "hz"
  std::string description;  // free text, e.g. "Hangzhou training cluster"
  int servers = 0;
  int gpus_per_server = 0;
  int rails = 0;           // 0 = gpus_per_server; GPU j of every server is on rail j % rails
  std::string scale_up;    // profile of GPU <-> NVSwitch links inside a server
  std::string rail;        // profile of GPU NIC <-> ToR links
  bool dual_tor = false;   // each NIC has two ports, on ToR a and ToR b of its rail
  int spines = 1;          // aggregation switches joining the rails' ToRs (0 = rails isolated)
  std::string spine_link;  // profile of ToR <-> spine links ("" = same as rail)
  std::string frontend;    // profile of server <-> VPC switch links
  Loc loc;
  // How the region's multipath routes pick a next hop (net.ipv4.fib_multipath_hash_policy in
  // every namespace of the region that holds one): "l3" (the kernel's default, policy 0: source
  // and destination address) or "l4" (policy 1: the 5-tuple, so a pair's connections spread).
  std::string ecmp_hash = "l3";
};

enum class WanRole { kPrimary, kBackup };

// A link between two regions' transit routers (Express Connect, VPN, CEN).
struct Wan {
  std::string name;  // [a-z][a-z0-9-]{0,11}; becomes the interface name on both routers
  std::string a, b;  // region names
  std::string profile;
  WanRole role = WanRole::kPrimary;
  Loc loc;
};

// kind = "training": the model and parallelism of one training step (workload/training.h has
// the step it becomes); compute is the real time per micro-batch per GPU, before [scale] compute.
struct TrainingModel {
  uint64_t params = 25'000'000;
  int grad_bytes = 2;
  uint64_t activation_bytes = 1 << 20;
  int layers = 8;
  int micro_batches = 1;
  int samples = 8;
  int tp = 1, pp = 1;
  uint64_t bucket_bytes = 25ull << 20;
  Duration compute{100'000'000};
  int steps = 10;
  std::vector<int> servers;  // the sweep of server counts; empty = every selected server
};

// A workload to run (executed by later verbs; parsed and validated now).
struct Workload {
  std::string name;
  std::string kind;  // "collective" | "checkpoint" | "command" | "training"
  std::string
      op;  // collective: allreduce allgather reducescatter broadcast reduce alltoall sendrecv
  std::string algo;           // collective: ring tree hd hier
  std::string ranks = "all";  // node selector: "all", a region "hz", "hz/s0", "hz/s0/g1";
                              // a list is joined with ',' ("hz/s0,bj")
  std::vector<std::string> rank_selectors = {"all"};  // the same, one canonical selector each
  uint64_t min_bytes = 8 * 1024;
  uint64_t max_bytes = 64 * 1024 * 1024;
  int step_factor = 2;
  int iters = 20;
  int warmup = 5;
  int channels = 1;
  // run: when a rank fails (a transport error, a killed rank), restart the whole group from
  // the last iteration every rank completed, as elastic training does, instead of ending.
  bool resilient = false;
  // command: any program, one process per selected GPU (`testbedctl launch`'s job): argv (a
  // TOML string is split at spaces), the tier its ranks talk over (auto, nvl, rail, frontend),
  // and an ECMAScript regular expression a line of its output matches once per iteration on
  // each rank that reports progress ("" = the whole job is one iteration).
  std::vector<std::string> command;
  std::string tier = "auto";
  std::string progress;
  std::string from, to;  // checkpoint: source and destination regions
  uint64_t bytes = 0;    // checkpoint: bytes per replication, real (scaled by [scale] bandwidth)
  std::string qos;       // checkpoint: "gold" | "silver" | "bronze" | ""
  // checkpoint: "full" (everything every time), "incremental" (only the blocks changed since the
  // last replication), "layered" (full every `full_every`, incremental in between).
  std::string mode = "full";
  double changed = 0.1;           // checkpoint: fraction of blocks changed between replications
  int full_every = 4;             // checkpoint, layered: a full replication every K
  Duration every{5'000'000'000};  // checkpoint: cadence, one replication due every this long
  int every_steps = 0;     // checkpoint: cadence in the run's workload iterations (0 = by `every`)
  int streams = 1;         // checkpoint: parallel TCP streams per shard
  uint64_t block = 4096;   // checkpoint: the changed-block bookkeeping's block size (bytes)
  TrainingModel training;  // training (with ranks, channels, warmup)
  Loc loc;
};

// One fault on the timeline (executed by later verbs; parsed and validated now).
struct Fault {
  Duration at;  // offset from the start of the run
  FaultKind kind = FaultKind::kLinkDown;
  std::string a, b;  // link faults: the two node names at the link's ends
  std::string link;  // link faults between transit routers: the WAN link's name ("ec")
  std::string node;  // node-crash, rank-kill
  std::string region_a, region_b;  // partition
  Duration duration;               // "for": 0 = until the end of the run / a later link-up
  Duration period;                 // flap
  int count = 0;                   // flap
  double loss_pct = 0;             // loss
  Duration delay;                  // latency: added one-way delay
  Loc loc;
};

// Expectations checked by `run` (later); every field optional.
struct Expect {
  std::optional<double> max_stall_ms;
  std::optional<double> min_busbw_fraction;
  std::optional<double> max_detection_ms;
  std::optional<double> max_recovery_ms;
  // checkpoint: every replication after the first (the seed: the standby starts empty, so it is
  // whole in every mode) finished before the next was due (its cadence kept up).
  std::optional<bool> checkpoint_on_time;
  // The gold class's 99th-percentile round trip (ms) across the first checkpoint workload's WAN
  // (run's gold probe: experiment/scenario_run.h); lost probes count as slower than any answered.
  std::optional<double> max_gold_p99_ms;
  Loc loc;
};

// How traffic between regions leaves a failed WAN link ([failover]):
//   link-state (default)  both routes installed by metric; the kernel skips a next hop whose
//                         link lost carrier (ignore_routes_with_linkdown); a gray failure
//                         (blackhole) is not seen
//   none                  only the primary route: traffic stalls until the link is repaired
//   agent                 a failover agent on each transit router probes every WAN path every
//                         probe_interval and withdraws a path's routes after `misses` lost
//                         probes in a row (and puts them back after as many answered ones):
//                         the white paper's active rerouting / failover group
//   bfd                   real routing daemons (Debian's frr: zebra, bgpd, bfdd) on each transit
//                         router: eBGP over every WAN link (primary preferred by local
//                         preference), BFD on each session every bfd_interval x bfd_multiplier;
//                         the WAN routes come from BGP
struct Failover {
  std::string mode = "link-state";
  Duration probe_interval{10'000'000};
  int misses = 3;
  Duration bfd_interval{300'000'000};  // FRR's default
  int bfd_multiplier = 3;
  // Dual-ToR host routes: "withdraw" (a fabric agent takes a GPU's /32 off the spines' ECMP
  // toward a ToR that lost the GPU's port, as BGP does in HPN) or "static" (the spines route
  // each rail subnet to both ToRs, whatever their ports do).
  std::string host_routes = "withdraw";
  Loc loc;
};

// QoS classes on every WAN link ([qos], docs/scenario.md "QoS classes"), after the white
// paper's intent: gold for latency-sensitive inference and control traffic (BFD, BGP and the
// failover agent's hellos are marked CS6), silver for data movement (and anything unmarked),
// bronze for bulk checkpoints. Classified by the DSCP the sender sets (a workload's `qos`).
struct QosClassSpec {
  std::string name;  // gold | silver | bronze
  double share = 0;  // guaranteed fraction of the link's rate, (0, 1]
  double ceiling = 1;
  int priority = 0;       // 0..7, 0 first
  std::vector<int> dscp;  // the first is what a workload with this qos marks
  Loc loc;
};

struct Qos {
  bool enabled = true;
  // Defaults: gold 30% (up to 100%), prio 0, EF 46 + CS6 48 + CS7 56; silver 50%, prio 1,
  // AF11 10, AF21 18, AF31 26; bronze 20%, prio 2, CS1 8 and LE 1 (RFC 8622).
  std::vector<QosClassSpec> classes = {{"gold", 0.3, 1.0, 0, {46, 48, 56}, {}},
                                       {"silver", 0.5, 1.0, 1, {18, 10, 26}, {}},
                                       {"bronze", 0.2, 1.0, 2, {8, 1}, {}}};
  std::string default_class = "silver";  // unmarked traffic
  Loc loc;

  const QosClassSpec* find(const std::string& name) const {
    for (const auto& c : classes)
      if (c.name == name) return &c;
    return nullptr;
  }
  // The DSCP a sender in class `name` marks (its first), 0 for "" (unmarked).
  int dscp_of(const std::string& name) const {
    const QosClassSpec* c = find(name);
    return c && !c->dscp.empty() ? c->dscp.front() : 0;
  }
};

// One machine the lab is spread over ([[host]], docs/scenario.md "Hosts"): `up --host NAME`
// builds the nodes placed on it. A region is placed whole (its transit router, VPC switch,
// spines, ToRs, servers and GPUs); a server listed under another host goes there with its GPUs.
struct Host {
  std::string name;                  // [a-z][a-z0-9-]{0,14}, e.g. a Slurm node name "node1"
  Ipv4 underlay;                     // the host's address on the network joining the hosts
  std::vector<std::string> regions;  // regions placed here
  std::vector<std::string> servers;  // servers placed here, canonical ("hz/s2")
  Loc loc;
};

// The VXLAN tunnels that carry links between hosts ([vxlan]): UDP destination port, and the
// first VNI (the k-th cross-host link in plan order gets vni_base + k).
struct Vxlan {
  int port = 4789;            // IANA's VXLAN port
  uint32_t vni_base = 10000;  // as netlab's multiserver plugin
  Loc loc;
};

struct Scenario {
  std::string file;  // the path it was loaded from
  std::string lab;   // [a-z][a-z0-9]{0,31}; namespaces are tb-<lab>-...
  std::string description;
  Prefix address_space{Ipv4{(198u << 24) | (18u << 16)}, 15};
  Scale scale;
  std::map<std::string, LinkProfile> profiles;  // every profile a region or WAN names, resolved
  std::vector<Region> regions;
  std::vector<Wan> wans;
  std::vector<Workload> workloads;
  std::vector<Fault> faults;
  Expect expect;
  Failover failover;
  Qos qos;
  Congestion congestion;
  std::vector<Host> hosts;  // empty: the whole lab on the one host `up` runs on
  Vxlan vxlan;

  const LinkProfile& profile(const std::string& name) const { return profiles.at(name); }
  int rails(const Region& r) const { return r.rails > 0 ? r.rails : r.gpus_per_server; }
  const Region* region(const std::string& name) const {
    for (const auto& r : regions)
      if (r.name == name) return &r;
    return nullptr;
  }
  const Host* host(const std::string& name) const {
    for (const auto& h : hosts)
      if (h.name == name) return &h;
    return nullptr;
  }
};

}  // namespace tb::scenario
