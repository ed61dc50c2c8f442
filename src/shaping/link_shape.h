// LinkShape: what one direction of a link should look like on the wire (rate, one-way delay,
// jitter, loss, MTU), as the plan carries it in SetShape. The shaping backends (backend.h) turn
// it into a qdisc tree.
//
// Plain values; thread-safe to copy and read.
#pragma once

#include <string>
#include <vector>

#include "core/units.h"

namespace tb::shaping {

// What a veth carries on this kind of host (research/limits.md): links emulated faster run at host
// speed, unshaped, and buffers are sized for this rate when a link has none.
inline constexpr Rate kHostVethRate{20e9};

// One QoS class of a link (scenario [qos]; docs/scenario.md "QoS classes"): a share of the
// link's rate it is guaranteed, a ceiling it may borrow up to when others leave rate unused, a
// priority (0 first) and the DSCP values classified into it.
struct QosClass {
  std::string name;       // "gold", "silver", "bronze"
  double share = 0;       // guaranteed fraction of the link's rate, (0, 1]
  double ceiling = 1;     // fraction it may reach by borrowing, [share, 1]
  int priority = 0;       // 0..7 (HTB's TC_HTB_NUMPRIO), 0 served first
  std::vector<int> dscp;  // 0..63 each; a value in one class only

  friend bool operator==(const QosClass&, const QosClass&) = default;
};

// A link's QoS classes; no classes = none (one rate limit for all traffic).
struct Qos {
  std::vector<QosClass> classes;
  size_t default_class = 0;  // where unmarked (and unlisted DSCP) traffic goes

  bool empty() const { return classes.empty(); }
  friend bool operator==(const Qos&, const Qos&) = default;
};

// One direction's congestion model (issue 32, docs/design-congestion.md; plan/congestion.h sets
// it). A lossless switch egress the congestion agent polls carries its thresholds and how many
// ingress ports feed it; a host's queue whose senders the agent pauses (a GPU's rail NIC) only
// its deeper limit. Lab bytes.
struct Congestion {
  std::string model;  // "" = droptail, "lossless", "ecn"
  uint64_t xoff = 0, xon = 0;
  uint64_t limit = 0;  // the queue's drop point (the TBF's limit); 0 = sizing.h limit_bytes
  int feeders = 0;     // a polled egress: the upstream queues it pauses; 0 = a host queue
  // ecn (a polled switch egress): marking from kmin to kmax of its backlog, pmax (0..1) at kmax;
  // mark_slot: its slot in the host's mark table (stage/mark_table.h), -1 = none; red: the
  // kernel marks instead (a RED child of the port's TBF, where the host has sch_red), with no
  // mark slot.
  uint64_t kmin = 0, kmax = 0;
  double pmax = 0;
  int mark_slot = -1;
  bool red = false;

  bool empty() const { return model.empty(); }
  friend bool operator==(const Congestion&, const Congestion&) = default;
};

struct LinkShape {
  Rate rate;            // 0 = not rate-limited
  Duration delay;       // one-way, added to every packet
  Duration jitter;      // standard deviation of that delay (scenario/model.h LinkProfile)
  double loss_pct = 0;  // 0..100, independent per packet
  int mtu = 1500;       // the interface's MTU; sizes bursts and queues
  // Jitter may reorder: each packet leaves at its own drawn delay. Default false: a packet never
  // leaves before the one sent ahead of it (docs/scenario.md "jitter").
  bool reorder = false;
  // QoS classes under the rate limit (backend_qos.cc); only WAN links get them.
  Qos qos;
  // Lossless queues (plan/congestion.h): their limit replaces limit_bytes' (sizing.h).
  Congestion congestion;

  friend bool operator==(const LinkShape&, const LinkShape&) = default;
};

}  // namespace tb::shaping
