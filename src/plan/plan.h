// plan::compile: a pure function from a Scenario, what the host offers (host.h) and what the user
// asked (PlanOptions) to a Plan: every op `up` performs, kernel objects and daemons alike, so a
// dry run (`testbedctl plan`) is the whole truth. No system calls; the same inputs always give
// the same names, addresses and order.
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

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "plan/host.h"
#include "plan/op.h"
#include "plan/topology.h"
#include "scenario/model.h"

namespace tb::plan {

// One host's share of a lab spread over several ([[host]]): what `up --host NAME` builds there.
struct HostPart {
  std::string name;
  Ipv4 underlay;
  std::vector<std::string> regions;  // placed whole
  std::vector<std::string> servers;  // placed apart from their region
  int nodes = 0, gpus = 0;
  int tunnels = 0;  // cross-host link ends built on this host
};

struct Plan {
  std::string lab;
  Topology topo;
  // Everything `up` does, in order: namespaces, bridges, veths, addresses, routes, sysctls,
  // hosts files, rxe devices, shaping (qdisc trees, delay-stage and loss rules), then the daemons
  // (delay stages, failover agents, fabric agents, FRR routers).
  std::vector<Op> ops;
  std::string shaping;      // backend kind ("netem", "tbf", "htb"), "" = links unshaped
  std::string shaping_how;  // how it was chosen: "probed", "asked", "assumed (not root: ...)"
  std::string failover = "link-state";  // [failover] mode
  std::string rdma = "none";            // "rxe" when the plan makes Soft-RoCE devices
  std::string rdma_why;                 // the host check's verdict, or "--rdma none"
  // A lab over several hosts: each host's part ([[host]] order; empty: one host), the host the
  // ops are for ("" = every host's ops, both ends of every tunnel), and the tunnels' UDP port.
  std::vector<HostPart> hosts;
  std::string host;
  int vxlan_port = 4789;
  // What every host must agree on, hashed (plan::digest): the same on every host that plans the
  // same scenario with the same lab name, whatever each host's kernel offers or which --host.
  std::string digest;

  // The daemons among the ops, by kind, in plan order.
  std::vector<Stage> stages() const { return daemons<Stage>(); }
  std::vector<Agent> agents() const { return daemons<Agent>(); }
  std::vector<Router> routers() const { return daemons<Router>(); }
  std::vector<FabricAgent> fabric() const { return daemons<FabricAgent>(); }
  std::vector<Daemon> all_daemons() const {
    std::vector<Daemon> out;
    for (const auto& op : ops)
      if (const auto* d = std::get_if<StartDaemon>(&op)) out.push_back(d->daemon);
    return out;
  }

 private:
  template <class T>
  std::vector<T> daemons() const {
    std::vector<T> out;
    for (const auto& op : ops)
      if (const auto* d = std::get_if<StartDaemon>(&op))
        if (const auto* t = std::get_if<T>(&d->daemon)) out.push_back(*t);
    return out;
  }
};

// The whole plan for `host` as `o` asks: topology, shaping with the backend choose_shaping picks
// (and the delay stages it leaves over; refused when they are needed and the host has no
// NFQUEUE), Soft-RoCE devices on every GPU rail NIC when the host has rxe and o.rdma is "auto",
// and the daemons. Bad input and what the host cannot do: exit code 2.
Result<Plan> compile(const scenario::Scenario& s, const HostCaps& host, const PlanOptions& o);
// Topology and failover daemons only: unshaped, no rxe (unit tests of the topology).
Result<Plan> compile(const scenario::Scenario& s);

// The dry-run text `testbedctl plan` prints: a header, then one op per line.
std::string to_text(const Plan& p);
// `plan`'s words on a lab over several hosts: each host's part and every cross-host link with
// its VNI and MTU ("" when the plan has no hosts).
std::string hosts_text(const Plan& p);
// The same as JSON: {"hosts": [...], "cross_host": [...], "digest": ..., "for_host": ...}.
nlohmann::json hosts_json(const Plan& p);

// FNV-1a 64 over the canonical JSON of what hosts must agree on: the lab's name, its hosts and
// their placement, the VXLAN port, and the topology (nodes with their hosts and addresses,
// links with their figures and VNIs) — not the ops, whose shaping depends on each host's
// kernel. 16 hex digits.
std::string digest(const std::string& lab, const std::vector<HostPart>& hosts, int vxlan_port,
                   const Topology& topo);

// The owner marker every object of lab `lab` carries (prefix of aliases and hosts files).
std::string owner_marker(const std::string& lab);

// The marker of the stage rules on `ifname` (egress or ingress); the kernel appends " queue" and
// " loss" (op.h AddStageRule). Shared by the planner and `link set`, which must find them.
std::string stage_rule_marker(const std::string& lab, const std::string& ifname, bool egress);

}  // namespace tb::plan
