// Congestion models in the plan (issue 32, docs/design-congestion.md sections 2 and 3): which
// switch egress queues are lossless, their XOFF/XON thresholds in lab bytes floored by the
// congestion agent's reaction time, their drop points, the ingress ports that feed each one, and
// the agents (one per host) that poll them and pause their feeders.
//
// Floors, per polled egress E at lab rate R, with P = [congestion] poll, L = late_budget, A =
// kAgentNetlink, F = one frame of E's link, and per feeder i its rate R_i, frame F_i, bucket B_i
// and D_i = its link's emulated delay + 4 x jitter (D = the largest D_i):
//   xon      >= R (P + A + D)                        resumed traffic takes D to arrive
//   xoff     >= xon + max(2F, 2 R P, sum B_i)         hysteresis; every resume releases a full
//                                                    bucket per feeder (P0)
//   headroom  = max(scaled, R_i (P + L + A + D_i) + F_i) per feeder
//   limit     = max(buffer, xoff + sum headroom + (n - 1) R idle_poll)
// A floor that wins writes a note on the link, as emulate's kMinEmulatedDelay does.
//
// Pure; thread-safe.
#pragma once

#include <vector>

#include "core/error.h"
#include "plan/daemon.h"
#include "plan/op.h"
#include "plan/shaping.h"
#include "scenario/model.h"

namespace tb::plan {

struct Plan;

// A in the floors: one netlink replace and its ack (P0: p50 12-71 us for a pause of two feeders).
inline constexpr Duration kAgentNetlink{100'000};
// A GPU's rail NIC (and a server's fe) behind a lossless port holds at least this: host memory,
// and paused sockets stop at TCP small queues (design section 3.7).
inline constexpr uint64_t kHostQueueLimit = 16u << 20;
// An ecn profile's pmax when it gives none (DCQCN's 1%).
inline constexpr double kDefaultPmax = 0.01;

// The host's mark table of lab `lab` (stage/mark_table.h): /dev/shm/testbedctl.<lab>.congestion,
// removed by `down` with the lab's other shared-memory files.
std::string mark_table_path(const std::string& lab);

// Each link's congestion figures (Link::emulated.congestion: model, and per direction the
// thresholds and limit of a polled switch egress or the limit of a paused host queue), with notes
// where a floor wins or a lossless link cannot be emulated. A profile that writes congestion =
// "lossless" on a link that cannot be lossless (it runs at host speed, crosses hosts in a VXLAN
// tunnel, or is a scale-up or WAN link) is bad input, FILE:LINE:COL of its `congestion`; a
// preset's default there stays droptail with a note. Call after place_on_hosts, before
// add_shaping (which shapes with these limits).
Status congestion_plan(Plan& p, const scenario::Scenario& s);

// The congestion agents of the plan, one per host ([[host]] order; one for a lab on one host),
// each running in its first polled switch's namespace; none when no queue is polled or when the
// shaping backend has no TBF to pause (a note then). Call after add_shaping: the ports' and
// upstreams' qdiscs are those of the plan's SetShape ops.
std::vector<CongestionAgent> congestion_agents(Plan& p, const scenario::Scenario& s);

// net/ipv4/tcp_ecn = 1 in every GPU and server namespace of a region with a marking (ecn) switch
// port, so their TCP negotiates ECN; net/ipv4/tcp_slow_start_after_idle = 0 in every GPU
// namespace whose rail is lossless: RDMA-like senders keep their window across compute gaps
// (design section 4).
std::vector<SetSysctl> congestion_sysctls(const Plan& p);

// The congestion control the default routes of a region with an ecn tier get (AddRoute
// congctl): one that halves its window on CE (RFC 3168). A lab namespace cannot pick its own
// default (net.ipv4.tcp_congestion_control in a namespace may only name the host's allowed
// list, "reno bbr" here) and a host's default may ignore CE (bbr does: design-congestion.md
// "P7 built"), but a route's RTAX_CC_ALGO may name any algorithm the kernel has. cubic is built
// into Debian's kernels; dctcp, DCQCN's TCP analogue (a window cut in proportion to the share of
// marked packets), is used instead where the kernel has it (HostCaps::dctcp, doctor's dctcp
// row; not this one). A route naming dctcp also turns ECN on for its connections
// (TCP_CONG_NEEDS_ECN).
inline constexpr const char* kEcnCongctl = "cubic";
inline constexpr const char* kEcnCongctlDctcp = "dctcp";

// In the GPU and server namespaces of every region with an ecn switch port: sets `congctl`
// (kEcnCongctl, or kEcnCongctlDctcp where the host has it) on the default routes (0.0.0.0/0: a
// server's via fe, a GPU's via nvl, both toward the VPC), and gives each VPC port's address (a GPU
// or server end of a frontend link: the servers' fe) IFA_F_NOPREFIXROUTE and the plan a route of
// its own for that subnet in its place (through the port, scope link, the address as source, metric
// 0, congctl kEcnCongctl), put before the namespace's first route in `routes`: server to server the
// VPC is one subnet, which the kernel's connected route would serve with the namespace's default
// TCP. The rails' and NVLink's routes keep the namespace's default; regions without an ecn port are
// left as they are. `link up` puts the subnet route back with the plan's others (fault/link_ops.h).
void set_ecn_congctl(const Plan& p, std::vector<Op>& addrs, std::vector<Op>& routes,
                     const std::string& congctl = kEcnCongctl);

}  // namespace tb::plan
