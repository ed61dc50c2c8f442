// Verbs that read a scenario and need no root: validate, plan, graph.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "capability/capabilities.h"
#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/flag_checks.h"
#include "lab/state.h"
#include "lab/up.h"
#include "plan/host.h"
#include "plan/plan.h"
#include "report/graph.h"
#include "report/status.h"
#include "scenario/loader.h"

namespace tb::cli {
namespace {

struct PlanFlags {
  std::string scenario, format = "text", shaping = "auto", host;
};

struct GraphFlags {
  std::string target, format;
};

// The scenario's topology and kernel objects as the planner makes them before shaping (no host
// to ask): what validate counts and graph draws.
Result<plan::Plan> compile_scenario(const std::string& path) {
  auto s = scenario::load(path);
  if (!s) return std::unexpected(s.error());
  return plan::compile(*s);
}

int cmd_validate(const std::string& path) {
  auto p = compile_scenario(path);
  if (!p) return report(p.error());
  int gpus = 0;
  for (const auto& n : p->topo.nodes) gpus += n.kind == plan::NodeKind::kGpu;
  const auto objects = std::ranges::count_if(
      p->ops, [](const plan::Op& op) { return !std::holds_alternative<plan::StartDaemon>(op); });
  std::printf("%s: ok — lab %s, %d GPUs, %zu nodes, %zu links, %zu kernel objects\n", path.c_str(),
              p->lab.c_str(), gpus, p->topo.nodes.size(), p->topo.links.size(),
              static_cast<size_t>(objects));
  return kExitOk;
}

int cmd_plan(const PlanFlags& f) {
  auto p = lab::make_plan(f.scenario, {"", f.shaping, "auto", f.host},
                          capability::host_for_plan(true, lab::run_root()));
  if (!p) return report(p.error());
  const std::string backend = p->shaping.empty() ? "none" : p->shaping;
  if (f.format == "json") {
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& op : p->ops) ops.push_back(plan::to_json(op));
    nlohmann::json j = {{"lab", p->lab},
                        {"shaping", {{"backend", backend}, {"chosen", p->shaping_how}}},
                        {"rdma", {{"devices", p->rdma}, {"why", p->rdma_why}}},
                        {"topology", plan::to_json(p->topo)},
                        {"ops", ops}};
    if (!p->hosts.empty()) j["hosts"] = plan::hosts_json(*p);
    std::cout << j.dump(1) << "\n";
    return kExitOk;
  }
  std::cout << report::summary_text(p->topo) << "\nshaping backend: " << backend << " ("
            << p->shaping_how << ")\nrdma: " << p->rdma << " (" << p->rdma_why << ")\n"
            << plan::hosts_text(*p) << plan::to_text(*p);
  return kExitOk;
}

int cmd_graph(const GraphFlags& f) {
  plan::Topology topo;
  std::string lab;
  if (std::filesystem::is_regular_file(f.target)) {
    auto p = compile_scenario(f.target);
    if (!p) return report(p.error());
    topo = std::move(p->topo);
    lab = p->lab;
  } else {
    auto st = lab::load_state(f.target);
    if (!st)
      return report(Error{"\"" + f.target + "\" is neither a scenario file nor a lab that is up", 0,
                          kExitBadInput});
    topo = std::move(st->topo);
    lab = st->lab;
  }
  std::cout << (f.format == "mermaid" ? report::graph_mermaid(lab, topo)
                                      : report::graph_dot(lab, topo));
  return kExitOk;
}

}  // namespace

void add_validate(CLI::App& app, int& rc) {
  auto path = std::make_shared<std::string>();
  auto* validate = app.add_subcommand("validate", "check a scenario file; exit 2 on bad input");
  validate->add_option("SCENARIO", *path)->required();
  validate->callback([path, &rc] { rc = cmd_validate(*path); });
}

void add_plan(CLI::App& app, int& rc) {
  auto f = std::make_shared<PlanFlags>();
  auto* plan =
      app.add_subcommand("plan", "dry run: print the kernel objects `up` would make (no root)");
  plan->add_option("SCENARIO", f->scenario)->required();
  plan->add_option("--format", f->format, "text | json")->check(CLI::IsMember({"text", "json"}));
  plan->add_option("--shaping", f->shaping, "auto | none | netem | tbf | htb (default auto)")
      ->check(checked_by(plan::check_shaping, "auto|none|netem|tbf|htb"));
  plan->add_option("--host", f->host,
                   "only this [[host]]'s part (a lab over several hosts; default: every host's)");
  plan->callback([f, &rc] { rc = cmd_plan(*f); });
}

void add_graph(CLI::App& app, int& rc) {
  auto f = std::make_shared<GraphFlags>();
  auto* graph = app.add_subcommand("graph", "draw a scenario's or a live lab's topology");
  graph->add_option("TARGET", f->target, "scenario file or lab name")
      ->required()
      ->check(scenario_file_or_lab_name());
  graph->add_option("--format", f->format, "dot | mermaid")
      ->check(CLI::IsMember({"dot", "mermaid"}))
      ->default_val("dot");
  graph->callback([f, &rc] { rc = cmd_graph(*f); });
}

}  // namespace tb::cli
