#include "report/graph.h"

#include <map>
#include <vector>

#include "scenario/names.h"

namespace tb::report {

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

}  // namespace tb::report
