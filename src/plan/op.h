// Plan operations: one kernel object (or owned file) each, as plain data.
//
// Every op names the namespace it acts in by its full name (tb-<lab>-<node>), so the applier
// needs no other context. Interfaces are created up, with the owner marker in their alias;
// namespaces get the owner marker on their loopback's alias (see apply/marker.h).
// Placement: every op runs on the local host today (ARCHITECTURE "Placement, for later").
//
// Plain values; thread-safe to copy and read.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "core/ipv4.h"
#include "plan/daemon.h"
#include "shaping/link_shape.h"

namespace tb::plan {

struct CreateNetns {
  std::string netns;   // "tb-hzbj-hz-s0-g3"
  std::string node;    // "hz/s0/g3"
  std::string marker;  // owner marker set as lo's alias, e.g. "testbedctl lab=hzbj node=hz/s0/g3"
};

struct Endpoint {
  std::string netns;
  std::string ifname;  // <= 15 characters, unique within its namespace
  std::string alias;   // owner marker + logical name
  std::string master;  // bridge in the same namespace to enslave to, or ""
};

struct CreateVeth {
  Endpoint a, b;
  int mtu = 1500;
};

struct CreateBridge {
  std::string netns;
  std::string ifname;
  std::string alias;
  int mtu = 1500;
};

struct AddAddr {
  std::string netns;
  std::string ifname;
  Prefix addr;  // address with its prefix length, e.g. 198.18.0.2/28
  // IFA_F_NOPREFIXROUTE (`ip addr add ... noprefixroute`): the kernel makes no route for the
  // address's subnet; the plan adds it as an AddRoute of its own. An ecn region's servers do
  // so for their VPC address, whose subnet route then carries a congctl (plan/congestion.h
  // set_ecn_congctl).
  bool noprefixroute = false;
};

struct Nexthop {
  std::string ifname;
  std::optional<Ipv4> via;  // gateway; set with onlink (unnumbered /32 links)
  int weight = 1;
};

struct AddRoute {
  std::string netns;
  Prefix dst;
  std::vector<Nexthop> nexthops;  // more than one = multipath (ECMP)
  std::optional<Ipv4> src;        // preferred source
  int metric = 0;
  // The TCP congestion control of connections on this route (RTA_METRICS RTAX_CC_ALGO, `ip route
  // ... congctl`); "" = the namespace's default. A region with an ecn tier gives its servers'
  // and GPUs' default routes, and its servers' VPC subnet route, one that reacts to CE
  // (plan/congestion.h set_ecn_congctl).
  std::string congctl;
};

// A per-namespace sysctl, e.g. key "net/ipv4/ip_forward" value "1".
struct SetSysctl {
  std::string netns;
  std::string key;
  std::string value;
};

// The namespace's hosts file (/etc/netns/<netns>/hosts, as `ip netns exec` and `testbedctl exec`
// bind-mount it over /etc/hosts). The content's first line is the owner marker.
struct WriteHosts {
  std::string netns;
  std::string content;
};

// The egress shaping of one interface: its root qdisc tree, replaced in place when it exists
// (shaping/backend.h builds the tree; `backend` is a registry kind: "netem", "tbf", "htb").
// Undo puts the interface's default qdisc back.
struct SetShape {
  std::string netns;
  std::string ifname;
  shaping::LinkShape shape;
  std::string backend;
};

// Steers one link direction into the userspace delay stage and/or drops a share of it, for
// kernels without netem: an NFQUEUE rule to `queue` (0 = none) and an nft loss rule
// (`loss_ppm`, parts per million; 0: none) on `ifname`, at ingress (PREROUTING, iif) or, for
// the NFQUEUE rule of a direction whose receiving port is a bridge port (never reaches IP), at
// the sending end's egress (POSTROUTING, oif, `egress`). That direction's loss is an op of its
// own on the bridge port, in the bridge's namespace, which the kernel makes an nft bridge family
// rule (it sees the port's master is a bridge). Their comments are `marker` + " queue" and
// `marker` + " loss" (stage/netfilter_rules.h), so `link set` can replace one; they die with
// their namespace.
struct AddStageRule {
  std::string netns;
  std::string ifname;
  bool egress = false;
  uint16_t queue = 0;
  uint32_t loss_ppm = 0;
  std::string marker;
};

// Soft-RoCE: an rxe RDMA device on a GPU's rail NIC (RDMA_NLDEV_CMD_NEWLINK from inside `netns`,
// apply/rxe.h). RDMA device names are global in the kernel's shared netns mode, so `name`
// carries the namespace's (plan::rxe_name). Undo deletes it before its netdev goes: teardown
// never leaves it to the namespace's deletion.
struct CreateRxe {
  std::string netns;
  std::string ifname;
  std::string node;
  std::string name;
  Ipv4 addr;  // the NIC's rail address, whose IPv4-mapped RoCE v2 GID the device gets
};

// One end of a link whose ends are on different hosts: a VXLAN device created from the host's
// own (underlay) namespace — the one `up` runs in — straight into node namespace `netns`
// (IFLA_NET_NS_FD), so its UDP socket stays on the underlay while the node sees an ordinary
// Ethernet port; then its alias, bridge master and up, as a veth end's. The far end is the same
// op on the peer host, with the same VNI and local/remote swapped.
struct CreateVxlan {
  std::string netns;
  std::string ifname;
  std::string alias;
  std::string master;  // bridge in `netns` to enslave it to, or ""
  uint32_t vni = 0;
  Ipv4 local;   // this host's underlay address
  Ipv4 remote;  // the peer host's underlay address
  int port = 4789;
  int mtu = 1450;
  std::string host;  // the host that builds this end
};

// A long-running process of the lab under the lab's supervisor (daemon.h): started once every
// kernel object is in place, stopped first on undo (with everything else the supervisor runs).
struct StartDaemon {
  std::string netns;  // where it runs
  Daemon daemon;
};

using Op = std::variant<CreateNetns, CreateVeth, CreateBridge, AddAddr, AddRoute, SetSysctl,
                        WriteHosts, SetShape, AddStageRule, CreateRxe, StartDaemon, CreateVxlan>;

// One line, the same text `testbedctl plan` prints and the golden tests pin.
std::string to_text(const Op& op);
// The namespace an op acts in (for CreateVeth, side a's).
const std::string& op_netns(const Op& op);

// Journal form: round-trips every field.
nlohmann::json to_json(const Op& op);
Result<Op> op_from_json(const nlohmann::json& j);

}  // namespace tb::plan
