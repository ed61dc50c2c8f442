#include "plan/plan.h"

namespace tb::plan {

std::string to_text(const Plan& p) {
  std::string s = "# plan for lab " + p.lab + ": " + std::to_string(p.topo.nodes.size()) +
                  " nodes, " + std::to_string(p.topo.links.size()) + " links, " +
                  std::to_string(p.ops.size()) + " ops\n";
  for (const auto& op : p.ops) s += to_text(op) + "\n";
  return s;
}

}  // namespace tb::plan
