// verify: measure a live lab's links and compare them with the figures the scenario asks for
// (verify/). One representative link per class (tier + profile), or the one --link names.
// Exit 0 when every class is within tolerance, 1 when one is not (or a measurement failed),
// 2 for bad input (unknown lab or link, not root, tb-probe missing, lab busy).
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/flag_checks.h"
#include "cli/stop_signals.h"
#include "lab/live.h"
#include "lab/state.h"
#include "plan/plan.h"
#include "report/status.h"
#include "report/verify.h"

namespace tb::cli {
namespace {

struct VerifyFlags {
  std::string lab;
  std::vector<std::string> link_ends;
  bool json = false, quick = false;
};

int cmd_verify(const std::string& lab, const std::vector<std::string>& link, bool json,
               bool quick) {
  auto st = lab::load_state(lab);
  if (!st) return report(Error{st.error().message, 0, kExitBadInput});
  if (st->phase != "up")
    return report(Error{"lab " + lab + " is " + st->phase + ", not up", 0, kExitBadInput});
  std::vector<verify::LinkClass> classes;
  if (!link.empty()) {
    if (link.size() != 2)
      return report(Error{"--link takes two endpoints: NODE[:IF] NODE[:IF]", 0, kExitBadInput});
    auto i = verify::find_link(st->topo, verify::parse_endpoint(link[0]),
                               verify::parse_endpoint(link[1]));
    if (!i) return report(i.error());
    classes.push_back(verify::class_of(st->topo, *i));
  } else {
    classes = verify::link_classes(st->topo);
  }
  if (auto rc = require_root("verify")) return *rc;
  auto tb_probe = verify::find_tb_probe();
  if (!tb_probe) return report(tb_probe.error());
  auto lock = lab::LabLock::acquire(lab);
  if (!lock) return report(Error{lock.error().message, 0, kExitBadInput});
  StopSignals signals;

  verify::VerifyReport rep;
  rep.lab = lab;
  rep.scenario = st->scenario;
  // What `status --json` says under "backends" (no live view needed for it).
  rep.backends = report::backends_json(*st);
  rep.shaping = rep.backends.value("shaping", "unknown");
  rep.quick = quick;
  rep.settings = verify::settings(quick);
  rep.single_link = !link.empty();
  const std::string work = lab::lab_dir(lab) + "/verify-" + std::to_string(::getpid());
  for (size_t n = 0; n < classes.size(); ++n) {
    if (stop_requested()) {
      rep.interrupted = true;
      break;
    }
    const auto& l = st->topo.links[classes[n].link];
    verify::ClassResult c{classes[n], l, {}, {}, {}, {}};
    std::fprintf(stderr, "verify %s: [%zu/%zu] %s  %s:%s -> %s:%s\n", lab.c_str(), n + 1,
                 classes.size(), c.cls.name().c_str(), l.a.node.c_str(), l.a.ifname.c_str(),
                 l.b.node.c_str(), l.b.ifname.c_str());
    auto ifaces = lab::interfaces_in(st->topo.node(l.b.node)->netns);
    auto target = ifaces ? verify::probe_target(st->topo, l, *ifaces)
                         : Result<verify::ProbeTarget>(std::unexpected(ifaces.error()));
    if (!target) {
      c.outcome.errors.push_back(target.error().message);
    } else {
      c.target = *target;
      c.request = verify::plan_request(l, *target, rep.settings);
      c.request.tb_probe = *tb_probe;
      c.request.owner = plan::owner_marker(lab);
      c.request.work_dir = work + "/" + std::to_string(n);
      c.outcome = verify::measure_link(c.request, signals.flag());
    }
    c.checks = verify::evaluate(l.emulated, c.outcome.m);
    rep.classes.push_back(std::move(c));
  }
  if (stop_requested()) rep.interrupted = true;
  std::error_code ec;
  std::filesystem::remove_all(work, ec);
  if (json)
    std::cout << report::verify_json(rep).dump(1) << "\n";
  else
    std::cout << report::verify_text(rep);
  return rep.passed() ? kExitOk : kExitFailed;
}

}  // namespace

void add_verify(CLI::App& app, int& rc) {
  auto f = std::make_shared<VerifyFlags>();
  auto* verify = app.add_subcommand(
      "verify", "measure each link class against the scenario; exit 1 out of tolerance (root)");
  verify->add_option("LAB", f->lab)->required()->check(lab_name());
  verify->add_option("--link", f->link_ends, "only the link between A and B: NODE[:IF] NODE[:IF]")
      ->expected(2);
  verify->add_flag("--json", f->json);
  verify->add_flag("--quick", f->quick,
                   "200 probes and a 2 s transfer per class, not 1000 and 5 s");
  verify->callback([f, &rc] { rc = cmd_verify(f->lab, f->link_ends, f->json, f->quick); });
}

}  // namespace tb::cli
