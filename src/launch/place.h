// Where a job's ranks run and how they reach each other: rank selection from the lab's topology,
// per-pair addressing by the plan's own tier rule (plan::reach), and which rail pairs go over
// RDMA. The orchestrator's half of workload/job.h (the rank only reads the finished Job).
// Pure: topology in, job fields out. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "lab/state.h"
#include "plan/topology.h"
#include "workload/job.h"

namespace tb::launch {

// `n`'s address of `role` as text; "" when it has none.
std::string addr_of(const plan::Node& n, const std::string& role);

// GPUs matching the selectors ("all", a region "hz", a server "hz/s0", a GPU "hz/s0/g1";
// several joined by ','), in region, server, GPU order; an error names a selector that
// matches nothing and what would be valid.
Result<std::vector<const plan::Node*>> select_ranks(const plan::Topology& topo,
                                                    const std::string& selectors);

// Fills ranks and peers from the topology for the selected GPUs. `frontend` (bench --tier
// frontend, as launch --tier frontend): pairs on two servers of a region go over the frontend
// (VPC) network instead of the rail, from and to the GPUs' NVLink-side addresses, which the
// servers route over their frontend ports (tier "frontend"); same-server pairs stay on NVLink
// and cross-region pairs on the WAN as always.
Status place_ranks(workload::Job& job, const plan::Topology& topo,
                   const std::vector<const plan::Node*>& gpus, bool frontend = false);

// Every pair of ranks on two different servers over the frontend instead of the rail (after
// place_ranks): both ends' NVLink-side addresses, which the plan routes through the servers and
// the VPC (as `launch --tier frontend`); pairs inside a server stay on NVLink. Exit 2 when a GPU
// has no NVLink-side address. `train --tier frontend` and the exercises use it too.
Status route_over_frontend(workload::Job& job, const std::vector<const plan::Node*>& gpus);

// --ports spread (after place_ranks): every rail pair whose two GPUs each have several rail
// ports on the same ToRs (dual ToR: raila on tor<j>a, railb on tor<j>b) gets those ports, in
// ToR order, as TcpPeer::ports: channel c of the pair leaves and arrives by port c % n at both
// ends, so n channels fill the n ports whatever the hash (collective/tcp/tcp.h). Pairs through
// a spine (GPUs on different rails) stay unbound: the spine, not the sender, would pick the
// far end's port. Returns how many ordered pairs were bound. Pure.
int bind_ports(workload::Job& job, const plan::Topology& topo,
               const std::vector<const plan::Node*>& gpus);

// Fills job.rdma (after place_ranks): pair (i, j) goes over RDMA when job.transport is rdma,
// its tier is "rail" and both ranks' namespaces hold an rxe device. job.rdma_fallback gets one
// line per rank whose rail pairs stay on TCP for want of a device. Pure.
void mark_rdma_pairs(workload::Job& job, const std::vector<apply::RxeDevice>& rxe);

}  // namespace tb::launch
