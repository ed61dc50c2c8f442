
#include "plan/plan.h"

namespace tb::plan {

std::string to_text(const Plan& p) {
  for (const auto& op : p.ops) (void)op;
  std::string s = "# plan for lab " + p.lab + ": " + std::to_string(p.topo.nodes.size()) +
                  " nodes, " + std::to_string(p.topo.links.size()) + " links, " +
                  std::to_string(p.ops.size()) + " ops\n";
  for (const auto& op : p.ops) s += to_text(op) + "\n";
  // Failover agents (only with [failover] mode = "agent"; goldens of other modes are unchanged).
  for (const auto& a : p.agents) {
    s += "agent " + a.node + " netns " + a.netns + " port " + std::to_string(a.port) + " every " +
         std::to_string(a.interval_ns / 1000) + "us misses " + std::to_string(a.misses);
    for (const auto& path : a.paths)
      s += " | " + path.name + " dev " + path.dev + " peer " + path.peer.to_string() + " metric " +
           std::to_string(path.metric);
    s += "\n";
  }
  for (const auto& r : p.routers) {
    s += "router " + r.node + " netns " + r.netns + " asn " + std::to_string(r.asn) + " id " +
         r.router_id.to_string() + " bfd " + std::to_string(r.bfd_interval_ms) + "ms x" +
         std::to_string(r.bfd_multiplier);
    for (const auto& n : r.networks) s += " network " + n.to_string();
    for (const auto& n : r.neighbors)
      s += " | " + n.wan + " neighbor " + n.addr.to_string() + " asn " + std::to_string(n.asn) +
           " local-pref " + std::to_string(n.local_pref);
    s += "\n";
  }
  for (const auto& f : p.fabric) {
    s += "fabric " + f.region + " netns " + f.netns +
         " host-route withdrawal: " + std::to_string(f.gpus.size()) + " GPUs, " +
         std::to_string(f.tors.size()) + " ToRs, spines";
    for (const auto& sp : f.spine_nodes) s += " " + sp;
    s += "\n";
  }
  return s;
}

}  // namespace tb::plan
