#include "cli/render.h"

#include <ctime>
#include <map>
#include <set>

#include "scenario/names.h"

namespace tb::cli {
namespace {

std::string figures(Rate r, Duration d, double loss) {
  std::string s = format_rate(r) + " " + format_duration(d);
  if (loss > 0) s += " " + std::to_string(loss).substr(0, 4) + "%";
  return s;
}

std::string pad(std::string s, size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s + " ";
}

const apply::IfaceInfo* find_iface(const LiveState* live, const std::string& netns,
                                   const std::string& ifname) {
  if (!live) return nullptr;
  auto it = live->find(netns);
  if (it == live->end()) return nullptr;
  for (const auto& i : it->second)
    if (i.ifname == ifname) return &i;
  return nullptr;
}

// "up", "down", "missing" or "unknown" (no live view without root).
std::string link_state(const plan::Topology& t, const plan::Link& l, const LiveState* live) {
  if (!live) return "unknown";
  const auto* a = find_iface(live, t.node(l.a.node)->netns, l.a.ifname);
  const auto* b = find_iface(live, t.node(l.b.node)->netns, l.b.ifname);
  if (!a || !b) return "missing";
  return a->oper_up && b->oper_up ? "up" : "down";
}

}  // namespace

nlohmann::json backends_json() {
  return {{"topology", "netlink (rtnetlink via libmnl): named netns, veth, bridge, routes"},
          {"shaping",
           "none: links are built unshaped and run at host veth speed; the "
           "emulated figures are derived from the scenario but not yet enforced"},
          {"transport", "none started by up"}};
}

std::string backends_text() {
  const auto j = backends_json();
  return "backends: topology " + j["topology"].get<std::string>() + "\n          shaping " +
         j["shaping"].get<std::string>() + "\n";
}

std::string summary_text(const plan::Topology& t) {
  std::map<std::string, int> kinds;
  for (const auto& n : t.nodes) kinds[to_string(n.kind)]++;
  std::string s = std::to_string(t.nodes.size()) + " nodes (";
  bool first = true;
  for (const char* k : {"gpu", "server", "tor", "spine", "vpc", "transit-router"})
    if (kinds[k]) {
      s += (first ? "" : ", ") + std::to_string(kinds[k]) + " " + k;
      first = false;
    }
  return s + "), " + std::to_string(t.links.size()) + " links";
}

std::string status_text(const apply::LabState& st, const LiveState* live) {
  char when[64];
  std::time_t t = st.created_unix;
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  std::string s = "lab " + st.lab + "  " + st.phase + " since " + when + "  scenario " +
                  st.scenario + "\n" + summary_text(st.topo) + "\n" + backends_text();
  if (!live) s += "live state: not read (needs root); showing the recorded topology\n";
  s += "\nNODES\n" + pad("NODE", 14) + pad("KIND", 14) + pad("NETNS", 22) + "ADDRESSES\n";
  for (const auto& n : st.topo.nodes) {
    std::string addrs;
    for (const auto& [role, a] : n.addrs) addrs += role + " " + a.to_string() + "  ";
    s += pad(n.name, 14) + pad(to_string(n.kind), 14) + pad(n.netns, 22) + addrs + "\n";
  }
  s += "\nLINKS (real = the scenario's figures; emulated = real / scale, configured)\n" +
       pad("TIER", 11) + pad("A", 18) + pad("B", 18) + pad("PROFILE", 16) + pad("REAL", 18) +
       pad("EMULATED", 18) + "STATE\n";
  std::set<std::string> notes;
  for (const auto& l : st.topo.links) {
    s += pad(to_string(l.tier), 11) + pad(l.a.node + ":" + l.a.ifname, 18) +
         pad(l.b.node + ":" + l.b.ifname, 18) +
         pad(l.profile + (l.role.empty() ? "" : "/" + l.role), 16) +
         pad(figures(l.real.rate, l.real.delay, l.real.loss_pct), 18) +
         pad(figures(l.emulated.rate, l.emulated.delay, l.emulated.loss_pct), 18) +
         link_state(st.topo, l, live) + "\n";
    for (const auto& n : l.emulated.notes) notes.insert(l.profile + ": " + n);
  }
  if (!notes.empty()) {
    s += "\nNOT EMULATED\n";
    for (const auto& n : notes) s += "  " + n + "\n";
  }
  return s;
}

nlohmann::json status_json(const apply::LabState& st, const LiveState* live) {
  nlohmann::json nodes = nlohmann::json::array(), links = nlohmann::json::array();
  for (const auto& n : st.topo.nodes) {
    nlohmann::json j = {
        {"name", n.name}, {"kind", to_string(n.kind)}, {"netns", n.netns}, {"region", n.region}};
    for (const auto& [role, a] : n.addrs) j["addrs"][role] = a.to_string();
    if (live && live->contains(n.netns)) {
      nlohmann::json ifs = nlohmann::json::array();
      for (const auto& i : live->at(n.netns)) {
        nlohmann::json addrs = nlohmann::json::array();
        for (const auto& a : i.addrs) addrs.push_back(a.to_string());
        ifs.push_back({{"ifname", i.ifname},
                       {"kind", i.kind},
                       {"admin_up", i.admin_up},
                       {"oper_up", i.oper_up},
                       {"mtu", i.mtu},
                       {"addrs", addrs},
                       {"rx_bytes", i.rx_bytes},
                       {"tx_bytes", i.tx_bytes}});
      }
      j["interfaces"] = ifs;
    }
    nodes.push_back(j);
  }
  auto topo = plan::to_json(st.topo);
  for (size_t i = 0; i < st.topo.links.size(); ++i) {
    auto j = topo["links"][i];
    j["state"] = link_state(st.topo, st.topo.links[i], live);
    links.push_back(j);
  }
  return {{"lab", st.lab},
          {"phase", st.phase},
          {"scenario", st.scenario},
          {"created_unix", st.created_unix},
          {"backends", backends_json()},
          {"live", live != nullptr},
          {"nodes", nodes},
          {"links", links}};
}

std::string graph_dot(const std::string& lab, const plan::Topology& t) {
  std::string s = "graph \"" + lab + "\" {\n  layout=dot; rankdir=TB; node [fontsize=10];\n";
  std::map<std::string, std::vector<const plan::Node*>> by_region;
  for (const auto& n : t.nodes) by_region[n.region].push_back(&n);
  for (const auto& [region, nodes] : by_region) {
    s += "  subgraph \"cluster_" + region + "\" {\n    label=\"" + region + "\";\n";
    for (const auto* n : nodes) {
      const char* shape = n->kind == plan::NodeKind::kGpu      ? "box"
                          : n->kind == plan::NodeKind::kServer ? "box3d"
                                                               : "ellipse";
      s += "    \"" + n->name + "\" [shape=" + shape + "];\n";
    }
    s += "  }\n";
  }
  for (const auto& l : t.links)
    s += "  \"" + l.a.node + "\" -- \"" + l.b.node + "\" [label=\"" + to_string(l.tier) + " " +
         format_rate(l.emulated.rate) + "\"];\n";
  return s + "}\n";
}

std::string graph_mermaid(const std::string& lab, const plan::Topology& t) {
  auto id = [](const std::string& n) { return scenario::host_name(n); };
  std::string s = "%% lab " + lab + "\ngraph TB\n";
  std::map<std::string, std::vector<const plan::Node*>> by_region;
  for (const auto& n : t.nodes) by_region[n.region].push_back(&n);
  for (const auto& [region, nodes] : by_region) {
    s += "  subgraph " + region + "\n";
    for (const auto* n : nodes) s += "    " + id(n->name) + "[\"" + n->name + "\"]\n";
    s += "  end\n";
  }
  for (const auto& l : t.links)
    s += "  " + id(l.a.node) + " ---|" + to_string(l.tier) + " " + format_rate(l.emulated.rate) +
         "| " + id(l.b.node) + "\n";
  return s;
}

}  // namespace tb::cli
