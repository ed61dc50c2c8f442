// Verbs that read a scenario and need no root: validate, plan, graph.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "capability/capabilities.h"
#include "cli/commands.h"
#include "cli/load.h"
#include "lab/state.h"
#include "lab/up.h"
#include "report/graph.h"
#include "report/status.h"

namespace tb::cli {

int report(const Error& e) {
  std::fprintf(stderr, "testbedctl: %s\n", e.message.c_str());
  return e.exit_code;
}

int cmd_validate(const std::string& path) {
  auto p = load_and_compile(path);
  if (!p) return report(p.error());
  int gpus = 0;
  for (const auto& n : p->topo.nodes) gpus += n.kind == plan::NodeKind::kGpu;
  std::printf("%s: ok — lab %s, %d GPUs, %zu nodes, %zu links, %zu kernel objects\n", path.c_str(),
              p->lab.c_str(), gpus, p->topo.nodes.size(), p->topo.links.size(), p->ops.size());
  return kExitOk;
}

int cmd_plan(const std::string& path, const std::string& format, const std::string& shaping_flag) {
  auto p = lab::make_plan(path, {"", shaping_flag, "auto"}, capability::host_for_plan(true));
  if (!p) return report(p.error());
  const std::string backend = p->shaping.empty() ? "none" : p->shaping;
  if (format == "json") {
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& op : p->ops) ops.push_back(plan::to_json(op));
    nlohmann::json j = {{"lab", p->lab},
                        {"shaping", {{"backend", backend}, {"chosen", p->shaping_how}}},
                        {"rdma", {{"devices", p->rdma}, {"why", p->rdma_why}}},
                        {"topology", plan::to_json(p->topo)},
                        {"ops", ops}};
    std::cout << j.dump(1) << "\n";
    return kExitOk;
  }
  std::cout << report::summary_text(p->topo) << "\nshaping backend: " << backend << " (" << p->shaping_how
            << ")\n"
            << plan::to_text(*p);
  return kExitOk;
}

int cmd_graph(const std::string& target, const std::string& format) {
  plan::Topology topo;
  std::string lab;
  if (std::filesystem::is_regular_file(target)) {
    auto p = load_and_compile(target);
    if (!p) return report(p.error());
    topo = std::move(p->topo);
    lab = p->lab;
  } else {
    auto st = lab::load_state(target);
    if (!st)
      return report(Error{"\"" + target + "\" is neither a scenario file nor a lab that is up", 0,
                          kExitBadInput});
    topo = std::move(st->topo);
    lab = st->lab;
  }
  std::cout << (format == "mermaid" ? report::graph_mermaid(lab, topo)
                                    : report::graph_dot(lab, topo));
  return kExitOk;
}

}  // namespace tb::cli
