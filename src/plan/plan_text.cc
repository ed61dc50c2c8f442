#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "plan/plan.h"

namespace tb::plan {

std::string to_text(const Plan& p) {
  std::string s = "# plan for lab " + p.lab + ": " + std::to_string(p.topo.nodes.size()) +
                  " nodes, " + std::to_string(p.topo.links.size()) + " links, " +
                  std::to_string(p.ops.size()) + " ops";
  if (!p.host.empty()) s += " on host " + p.host;
  s += "\n";
  for (const auto& op : p.ops) s += to_text(op) + "\n";
  return s;
}

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

const Node& node_of(const Plan& p, const std::string& name) {
  const Node* n = p.topo.node(name);
  TB_CHECK(n != nullptr);
  return *n;
}

}  // namespace

std::string hosts_text(const Plan& p) {
  if (p.hosts.empty()) return "";
  std::string s = fmt::format("hosts: {} (plan digest {}; VXLAN UDP port {})\n", p.hosts.size(),
                              p.digest, p.vxlan_port);
  for (const auto& h : p.hosts) {
    std::string holds;
    if (!h.regions.empty()) holds = "regions " + joined(h.regions);
    if (!h.servers.empty()) holds += (holds.empty() ? "" : "; ") + ("servers " + joined(h.servers));
    s += fmt::format("  {:<15} underlay {:<15}  {:>4} nodes {:>4} GPUs {:>3} tunnel ends  {}{}\n",
                     h.name, h.underlay.to_string(), h.nodes, h.gpus, h.tunnels, holds,
                     h.name == p.host ? "  (these ops)" : "");
  }
  size_t cross = 0;
  for (const auto& l : p.topo.links) cross += l.vni != 0;
  s += fmt::format("cross-host links: {}\n", cross);
  for (const auto& l : p.topo.links) {
    if (!l.vni) continue;
    s += fmt::format("  vni {:<8} {:<11} {}:{} ({}) <-> {}:{} ({})  mtu {} ({} - {} VXLAN)\n",
                     l.vni, to_string(l.tier), l.a.node, l.a.ifname, node_of(p, l.a.node).host,
                     l.b.node, l.b.ifname, node_of(p, l.b.node).host, l.emulated.mtu,
                     l.emulated.mtu + kVxlanOverhead, kVxlanOverhead);
  }
  return s;
}

nlohmann::json hosts_json(const Plan& p) {
  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& h : p.hosts)
    hosts.push_back({{"name", h.name},
                     {"underlay", h.underlay.to_string()},
                     {"regions", h.regions},
                     {"servers", h.servers},
                     {"nodes", h.nodes},
                     {"gpus", h.gpus},
                     {"tunnel_ends", h.tunnels}});
  nlohmann::json cross = nlohmann::json::array();
  for (const auto& l : p.topo.links)
    if (l.vni)
      cross.push_back(
          {{"vni", l.vni},
           {"tier", to_string(l.tier)},
           {"a", {{"node", l.a.node}, {"ifname", l.a.ifname}, {"host", node_of(p, l.a.node).host}}},
           {"b", {{"node", l.b.node}, {"ifname", l.b.ifname}, {"host", node_of(p, l.b.node).host}}},
           {"mtu", l.emulated.mtu},
           {"overhead", kVxlanOverhead}});
  return {{"hosts", hosts},
          {"cross_host", cross},
          {"vxlan_port", p.vxlan_port},
          {"digest", p.digest},
          {"for_host", p.host}};
}

std::string digest(const std::string& lab, const std::vector<HostPart>& hosts, int vxlan_port,
                   const Topology& topo) {
  nlohmann::json j = {{"lab", lab}, {"topology", to_json(topo)}};
  if (!hosts.empty()) {
    nlohmann::json hs = nlohmann::json::array();
    for (const auto& h : hosts)
      hs.push_back({{"name", h.name},
                    {"underlay", h.underlay.to_string()},
                    {"regions", h.regions},
                    {"servers", h.servers}});
    j["hosts"] = hs;
    j["vxlan_port"] = vxlan_port;
  }
  const std::string text = j.dump();
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;  // FNV-1a 64 prime
  }
  return fmt::format("{:016x}", h);
}

}  // namespace tb::plan
