// `testbedctl link LAB set|reset|down|up A B`: change a live link in place. Rates and qdisc
// figures are replaced in the kernel (no delete and re-add), a delay stage's queue is changed by
// rewriting its config and SIGHUP, a loss rule is swapped; every change is an event.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "apply/netlink_kernel.h"
#include "cli/commands.h"
#include "fault/link_ops.h"
#include "lab/link_change.h"
#include "lab/state.h"
#include "plan/emulate.h"

namespace tb::cli {
namespace {

std::string format_percent(double p) {
  return fmt::format("{:g}%", p);
}

}  // namespace

int cmd_link(const std::string& lab, const std::string& action, const std::string& a,
             const std::string& b, const lab::FigureChange& change) {
  auto st = lab::load_state(lab);
  if (!st) return report(Error{st.error().message, 0, kExitBadInput});
  auto idx = lab::find_link(st->topo, a, b);
  if (!idx) return report(idx.error());
  if (action == "set" && change.empty())
    return report(Error{"link set needs at least one of --rate, --delay, --jitter, --loss", 0,
                        kExitBadInput});
  if (auto rc = require_root("link")) return *rc;
  auto lock = lab::LabLock::acquire(lab);
  if (!lock) return report(lock.error());
  const std::string key = lab::link_key(st->topo.links[*idx]);
  apply::NetlinkKernel kernel;
  std::string said = action;
  if (action == "down" || action == "up") {
    if (auto r = fault::set_link_state(*st, kernel, *idx, action == "up"); !r)
      return report(r.error());
  } else {
    auto next = fault::change_link(*st, kernel, *idx, action == "reset", change);
    if (!next) return report(next.error());
    said = "rate " + format_rate(next->rate) + ", delay " + format_duration(next->delay) +
           ", jitter " + format_duration(next->jitter) + ", loss " + format_percent(next->loss_pct);
  }
  std::printf("%s: %s\n", key.c_str(), said.c_str());
  return kExitOk;
}

}  // namespace tb::cli
