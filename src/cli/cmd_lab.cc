// Verbs that change or inspect a live lab: up, down, clean, status, exec.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <regex>

#include "apply/netlink_kernel.h"
#include "cli/commands.h"
#include "cli/load.h"
#include "lab/daemons.h"
#include "lab/lab.h"
#include "lab/link_change.h"
#include "lab/up.h"
#include "report/status.h"
#include "runner/exec.h"
#include "scenario/names.h"

namespace tb::cli {
namespace {

// "LAB|SCENARIO": a path to an existing file names the scenario's lab.
Result<std::string> resolve_lab(const std::string& target) {
  if (std::filesystem::is_regular_file(target)) {
    auto s = scenario::load(target);
    if (!s) return std::unexpected(s.error());
    return s->lab;
  }
  return target;
}

}  // namespace

std::optional<int> require_root(const std::string& verb) {
  if (auto r = lab::require_root(verb); !r) return report(r.error());
  return std::nullopt;
}

void print_up(const lab::UpReport& r) {
  const plan::Plan& p = r.plan;
  std::printf("lab %s is up: %s built in %.2f s\n", p.lab.c_str(),
              report::summary_text(p.topo).c_str(),
              r.seconds);
  std::printf("shaping: %s (%s)%s\n", p.shaping.empty() ? "none" : p.shaping.c_str(),
              p.shaping_how.c_str(),
              p.stages().empty()
                  ? ""
                  : (", " + std::to_string(p.stages().size()) + " delay stages running").c_str());
  std::printf("rdma: %s (%s)\n", r.state.rdma == "rxe" ? "Soft-RoCE on the rail" : "none, TCP",
              r.state.rdma_why.c_str());
  std::vector<std::string> gpus;
  for (const auto& n : p.topo.nodes)
    if (n.kind == plan::NodeKind::kGpu) gpus.push_back(n.name);
  if (gpus.size() >= 2)
    std::printf("try:  testbedctl status %s\n      testbedctl exec %s %s -- ping -c1 %s\n",
                p.lab.c_str(), p.lab.c_str(), gpus.front().c_str(),
                scenario::host_name(gpus.back()).c_str());
  std::printf("      testbedctl down %s\n", p.lab.c_str());
}

int cmd_up(const std::string& path, const std::string& name, const std::string& shaping_flag,
           const std::string& rdma_flag) {
  auto r = lab::bring_up({path, {name, shaping_flag, rdma_flag}});
  if (!r) return report(r.error());
  print_up(*r);
  return kExitOk;
}

int cmd_down(const std::string& target) {
  auto lab = resolve_lab(target);
  if (!lab) return report(lab.error());
  if (auto rc = require_root("down")) return *rc;
  const bool known = lab::load_state(*lab).has_value();
  apply::NetlinkKernel kernel;
  if (auto r = lab::down(*lab, kernel); !r) return report(r.error());
  std::printf(known ? "lab %s is down\n" : "lab %s was not up; nothing left of it\n", lab->c_str());
  return kExitOk;
}

int cmd_clean(const std::string& lab, bool all) {
  if (lab.empty() == !all)
    return report(Error{"clean needs either a lab name or --all", 0, kExitBadInput});
  if (auto rc = require_root("clean")) return *rc;
  apply::NetlinkKernel kernel;
  std::optional<lab::LabLock> lock;
  if (!lab.empty()) {
    auto l = lab::LabLock::acquire(lab);
    if (!l) return report(l.error());
    lock.emplace(std::move(*l));
  }
  auto r = lab::clean(all ? "" : lab, kernel);
  if (!r) return report(r.error());
  std::printf("removed %d namespace%s%s\n", *r, *r == 1 ? "" : "s",
              all ? " of all labs" : (" of lab " + lab).c_str());
  return kExitOk;
}

int cmd_status(const std::string& lab, bool json) {
  if (lab.empty()) {
    std::vector<lab::LabState> labs;
    for (const auto& l : lab::list_labs())
      if (auto st = lab::load_state(l)) labs.push_back(std::move(*st));
    if (json)
      std::cout << report::labs_json(labs).dump(1) << "\n";
    else
      std::cout << report::labs_text(labs);
    return kExitOk;
  }
  auto st = lab::load_state(lab);
  if (!st) return report(Error{st.error().message, 0, kExitBadInput});
  // Links `link set` (or a fault) changed show the figures in force now.
  const auto overrides = lab::load_link_overrides(lab);
  for (auto& l : st->topo.links)
    if (auto it = overrides.find(lab::link_key(l)); it != overrides.end()) {
      auto notes = l.emulated.notes;
      l.emulated = it->second;
      l.emulated.notes = notes;
    }
  report::LiveState live;
  const bool have_live = ::geteuid() == 0;
  if (have_live) {
    apply::NetlinkKernel kernel;
    for (const auto& n : st->topo.nodes) {
      auto ifs = kernel.interfaces(n.netns);
      if (ifs) live[n.netns] = std::move(*ifs);
    }
  }
  if (json)
    std::cout << report::status_json(*st, have_live ? &live : nullptr).dump(1) << "\n";
  else
    std::cout << report::status_text(*st, have_live ? &live : nullptr);
  return kExitOk;
}

int cmd_exec(const std::string& lab, const std::string& node,
             const std::vector<std::string>& argv) {
  auto st = lab::load_state(lab);
  if (!st) return report(Error{st.error().message, 0, kExitBadInput});
  const plan::Node* n = st->topo.node(scenario::canonical_node(node));
  if (!n) {
    std::string some;
    for (size_t i = 0; i < st->topo.nodes.size() && i < 4; ++i)
      some += (i ? ", " : "") + st->topo.nodes[i].name;
    return report(Error{"lab " + lab + " has no node \"" + node + "\" (nodes are named like " +
                            some + "; see `testbedctl status " + lab + "`)",
                        0, kExitBadInput});
  }
  if (auto rc = require_root("exec")) return *rc;
  auto r = runner::exec_in_netns(n->netns, argv);
  if (!r) return report(r.error());
  return *r;
}

}  // namespace tb::cli
