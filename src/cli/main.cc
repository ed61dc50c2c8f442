// testbedctl: parse flags, call a verb (commands.h). Nothing else lives here.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"testbedctl — emulated AI-training clusters from network namespaces"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "testbedctl 0.1.0");
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "log every kernel operation");

  std::string scenario, target, lab, node, format = "text", name;
  bool json = false, all = false;
  std::vector<std::string> command;

  auto* validate = app.add_subcommand("validate", "check a scenario file; exit 2 on bad input");
  validate->add_option("SCENARIO", scenario)->required();
  auto* plan =
      app.add_subcommand("plan", "dry run: print the kernel objects `up` would make (no root)");
  plan->add_option("SCENARIO", scenario)->required();
  plan->add_option("--format", format, "text | json")->check(CLI::IsMember({"text", "json"}));
  auto* graph = app.add_subcommand("graph", "draw a scenario's or a live lab's topology");
  graph->add_option("TARGET", target, "scenario file or lab name")->required();
  graph->add_option("--format", format, "dot | mermaid")
      ->check(CLI::IsMember({"dot", "mermaid"}))
      ->default_val("dot");
  auto* up = app.add_subcommand("up", "build the lab a scenario describes (root)");
  up->add_option("SCENARIO", scenario)->required();
  up->add_option("--name", name, "lab name instead of the scenario's [lab] name");
  auto* down = app.add_subcommand("down", "remove everything a lab made; idempotent (root)");
  down->add_option("TARGET", target, "lab name or scenario file")->required();
  auto* clean =
      app.add_subcommand("clean", "remove leftovers by owner marker when state is lost (root)");
  clean->add_option("LAB", lab);
  clean->add_flag("--all", all, "every lab's leftovers");
  auto* status =
      app.add_subcommand("status", "servers, GPUs, interfaces, addresses, links, backends");
  status->add_option("LAB", lab);
  status->add_flag("--json", json);
  auto* exec = app.add_subcommand("exec", "run a command inside a node's namespace (root)");
  exec->add_option("LAB", lab)->required();
  exec->add_option("NODE", node, "e.g. hz/s0/g3 or hz-s0-g3")->required();
  exec->add_option("CMD", command, "command and arguments, after --")->required();
  auto* supervise = app.add_subcommand("supervise", "");  // internal: started by up
  supervise->add_option("LAB", lab)->required();
  supervise->group("");
  auto* doctor = app.add_subcommand("doctor", "probe what this kernel offers and what falls back");
  doctor->add_flag("--json", json);
  std::vector<std::string> link_ends;
  bool quick = false;
  auto* verify = app.add_subcommand(
      "verify", "measure each link class against the scenario; exit 1 out of tolerance (root)");
  verify->add_option("LAB", lab)->required();
  verify->add_option("--link", link_ends, "only the link between A and B: NODE[:IF] NODE[:IF]")
      ->expected(2);
  verify->add_flag("--json", json);
  verify->add_flag("--quick", quick, "200 probes and a 2 s transfer per class, not 1000 and 5 s");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : tb::kExitBadInput;
  }
  // Logs go to stderr, so `--json` and `plan --format json` stay parseable with -v.
  spdlog::set_default_logger(spdlog::stderr_color_mt("testbedctl"));
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::warn);
  spdlog::set_pattern("%^%l%$: %v");

  using namespace tb::cli;
  if (*validate) return cmd_validate(scenario);
  if (*plan) return cmd_plan(scenario, format);
  if (*graph) return cmd_graph(target, format);
  if (*up) return cmd_up(scenario, name);
  if (*down) return cmd_down(target);
  if (*clean) return cmd_clean(lab, all);
  if (*status) return cmd_status(lab, json);
  if (*exec) return cmd_exec(lab, node, command);
  if (*doctor) return cmd_doctor(json);
  if (*verify) return cmd_verify(lab, link_ends, json, quick);
  if (*supervise) return cmd_supervise(lab);
  return tb::kExitBadInput;
}
