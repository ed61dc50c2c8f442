// Verbs that change or inspect a live lab: up, down, clean, status, exec. Each calls its use
// case in lab/ (up.h, down.h, status.h, exec.h) and prints the result.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/flag_checks.h"
#include "cli/lab_text.h"
#include "cli/progress.h"
#include "lab/down.h"
#include "lab/exec.h"
#include "lab/status.h"
#include "lab/up.h"
#include "plan/host.h"
#include "report/status.h"

namespace tb::cli {
namespace {

struct StatusFlags {
  std::string lab;  // "": every lab, one line each
  bool json = false;
  bool names = false;      // names only: the labs, or the lab's nodes (scripts, shell completion)
  bool all_users = false;  // root: every user's labs (lab/status.h summarize_all_users)
};

int cmd_up(lab::UpOptions o) {
  Progress progress("up " + (o.plan.lab.empty() ? o.scenario_path : o.plan.lab));
  o.progress = [&progress](size_t done, size_t total) { progress.step(done, total, "ops"); };
  auto r = lab::bring_up(o);
  progress.done();
  if (!r) return report(r.error());
  print_up(*r);
  return kExitOk;
}

int cmd_down(const lab::DownOptions& o) {
  auto r = lab::take_down(o);
  if (!r) return report(r.error());
  print_down(*r);
  return kExitOk;
}

int cmd_clean(const lab::CleanOptions& o) {
  auto r = lab::clean_up(o);
  if (!r) return report(r.error());
  const int n = r->namespaces;
  std::printf("removed %d namespace%s%s\n", n, n == 1 ? "" : "s",
              o.all ? " of all labs" : (" of lab " + o.lab).c_str());
  for (const auto& u : r->users)
    std::printf("user %s: took down %d lab%s, removed %d leftover namespace%s\n", u.user.c_str(),
                u.labs, u.labs == 1 ? "" : "s", u.namespaces, u.namespaces == 1 ? "" : "s");
  return kExitOk;
}

int print_lab_list(bool json) {
  const auto labs = lab::summarize_labs();
  if (json)
    std::cout << report::labs_json(labs).dump(1) << "\n";
  else
    std::cout << report::labs_text(labs);
  return kExitOk;
}

int cmd_status(const StatusFlags& f) {
  if (f.all_users) {
    auto all = lab::summarize_all_users();
    if (!all) return report(all.error());
    if (f.json)
      std::cout << report::labs_by_user_json(*all).dump(1) << "\n";
    else
      std::cout << report::labs_by_user_text(*all);
    return std::ranges::any_of(*all, [](const auto& u) { return !u.error.empty(); }) ? kExitFailed
                                                                                     : kExitOk;
  }
  if (f.names) {
    if (f.lab.empty()) {
      for (const auto& l : lab::summarize_labs()) std::cout << l.lab << "\n";
      return kExitOk;
    }
    auto st = lab::load_state(f.lab);
    if (!st) return report(Error{st.error().message, 0, kExitBadInput});
    for (const auto& n : st->topo.nodes) std::cout << n.name << "\n";
    return kExitOk;
  }
  if (f.lab.empty()) return print_lab_list(f.json);
  auto s = lab::read_status(f.lab);
  if (!s) return report(s.error());
  const report::LiveState* live = s->live ? &*s->live : nullptr;
  if (f.json)
    std::cout << report::status_json(s->state, live, s->scenario_figures, &s->congestion).dump(1)
              << "\n";
  else
    std::cout << report::status_text(s->state, live, s->scenario_figures, &s->congestion);
  // A lab with a stopped stage or daemon is not healthy: scripts and CI see it in the exit code
  // (the text and JSON say which).
  return report::processes_down(report::backends_json(s->state)) > 0 ? kExitFailed : kExitOk;
}

int cmd_exec(const lab::ExecOptions& o) {
  auto r = lab::exec_on_node(o);
  if (!r) return report(r.error());
  return *r;
}

}  // namespace

void add_up(CLI::App& app, int& rc) {
  auto o = std::make_shared<lab::UpOptions>();
  auto* up = app.add_subcommand("up", "build the lab a scenario describes (root)");
  up->add_option("SCENARIO", o->scenario_path)->required();
  up->add_option("--name", o->plan.lab, "lab name instead of the scenario's [lab] name")
      ->check(lab_name());
  up->add_option("--shaping", o->plan.shaping,
                 "auto (probe this kernel) | none | netem | tbf | htb (default auto)")
      ->check(checked_by(plan::check_shaping, "auto|none|netem|tbf|htb"));
  up->add_option("--rdma", o->plan.rdma,
                 "auto (Soft-RoCE on every GPU rail NIC when a probe transfer between two "
                 "namespaces works) | none (default auto)")
      ->check(checked_by(plan::check_rdma, "auto|none"));
  up->add_option("--host", o->plan.host,
                 "a lab over several hosts: build only this [[host]]'s part (its nodes, and its "
                 "end of every VXLAN tunnel to the others)");
  up->callback([o, &rc] { rc = cmd_up(*o); });
}

void add_down(CLI::App& app, int& rc) {
  auto o = std::make_shared<lab::DownOptions>();
  auto* down = app.add_subcommand("down", "remove everything a lab made; idempotent (root)");
  down->add_option("TARGET", o->target, "lab name or scenario file")
      ->required()
      ->check(scenario_file_or_lab_name());
  down->add_option("--host", o->host,
                   "a lab over several hosts: the [[host]] whose part this is (checked against "
                   "this host's state of the lab)");
  down->callback([o, &rc] { rc = cmd_down(*o); });
}

void add_clean(CLI::App& app, int& rc) {
  auto o = std::make_shared<lab::CleanOptions>();
  auto* clean =
      app.add_subcommand("clean", "remove leftovers by owner marker when state is lost (root)");
  auto* lab = clean->add_option("LAB", o->lab)->check(lab_name());
  clean
      ->add_flag("--all", o->all,
                 "every lab's leftovers (root: also takes down every user's labs, inside each "
                 "user's keeper)")
      ->excludes(lab);
  clean->callback([o, &rc] { rc = cmd_clean(*o); });
}

void add_status(CLI::App& app, int& rc) {
  auto f = std::make_shared<StatusFlags>();
  auto* status = app.add_subcommand(
      "status", "servers, GPUs, interfaces, addresses, links, backends, congestion counters");
  auto* lab = status->add_option("LAB", f->lab)->check(lab_name());
  status->add_flag("--json", f->json);
  status
      ->add_flag("--all-users", f->all_users,
                 "root: every user's labs (user, lab, state), each read inside that user's keeper")
      ->excludes(lab);
  status->add_flag("--names", f->names,
                   "names only, one per line: the labs, or with LAB its nodes (for scripts and "
                   "shell completion)");
  status->callback([f, &rc] { rc = cmd_status(*f); });
}

void add_exec(CLI::App& app, int& rc) {
  auto o = std::make_shared<lab::ExecOptions>();
  auto* exec = app.add_subcommand("exec", "run a command inside a node's namespace (root)");
  exec->add_option("LAB", o->lab)->required()->check(lab_name());
  exec->add_option("NODE", o->node, "e.g. hz/s0/g3 or hz-s0-g3")->required();
  exec->add_option("CMD", o->argv, "command and arguments, after --")->required();
  exec->callback([o, &rc] { rc = cmd_exec(*o); });
}

}  // namespace tb::cli
