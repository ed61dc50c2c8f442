#include "lab/up.h"

#include <unistd.h>

#include <filesystem>

#include "apply/netlink_kernel.h"
#include "capability/capabilities.h"
#include "capability/underlay.h"
#include "core/paths.h"
#include "lab/lab.h"
#include "scenario/loader.h"

namespace tb::lab {

Status require_root(const std::string& verb) {
  if (::geteuid() == 0) return {};
  return bad_input(verb +
                   " needs root (it creates network namespaces and interfaces); run it with sudo");
}

Result<plan::Plan> make_plan(const std::string& scenario_path, const plan::PlanOptions& o,
                             const plan::HostCaps& host) {
  TB_TRY(plan::validate(o));
  auto s = scenario::load(scenario_path);
  if (!s) return std::unexpected(s.error());
  return plan::compile(*s, host, o);
}

Result<UpReport> bring_up(const UpOptions& o) {
  TB_TRY(plan::validate(o.plan));
  auto s = scenario::load(o.scenario_path);
  if (!s) return std::unexpected(s.error());
  if (!s->hosts.empty() && o.plan.host.empty()) {
    std::string names;
    for (const auto& h : s->hosts) names += (names.empty() ? "" : ", ") + h.name;
    return bad_input(o.scenario_path + " spreads the lab over hosts " + names +
                     "; say which one this is: up " + o.scenario_path + " --host NAME");
  }
  TB_TRY(require_root("up"));
  if (paths::rootless()) {
    // What a user namespace cannot have (docs/design-rootless.md §0): the host's own underlay.
    // (rxe: --rdma is auto or none, and auto falls back to TCP with doctor's reason.)
    if (!s->hosts.empty())
      return bad_input(o.scenario_path + " spreads the lab over hosts (" + s->hosts.front().name +
                       ", ...): a lab over several hosts uses the host's own network (VXLAN on "
                       "its underlay) and needs root; run it with sudo");
  }
  if (auto overlap = overlapping_host_routes(s->address_space); !overlap.empty())
    return bad_input("address_space " + s->address_space.to_string() +
                     " overlaps this host's route " + overlap.front() +
                     "; set [lab] address_space in " + o.scenario_path + " to a free range");
  const plan::HostCaps host = capability::host_for_plan(o.plan.rdma != "none", run_root());
  auto p = plan::compile(*s, host, o.plan);
  if (!p) return std::unexpected(p.error());
  if (paths::rootless())
    for (const auto& d : p->all_daemons())
      if (std::holds_alternative<plan::Router>(d))
        return bad_input(o.scenario_path +
                         ": [failover] mode = \"bfd\" runs FRR, whose daemons switch to user "
                         "frr, which a user namespace does not map (zebra: \"could not "
                         "setgroups\"); run it with sudo, or use mode \"agent\" or "
                         "\"link-state\"");
  if (const scenario::Host* me = s->host(o.plan.host)) {
    std::vector<capability::UnderlayPeer> peers;
    for (const auto& h : s->hosts)
      if (h.name != me->name) peers.push_back({h.name, h.underlay});
    // Each peer's largest VXLAN packet: a tunnel's MTU + the encapsulation is its link's MTU.
    for (const auto& l : p->topo.links) {
      if (l.vni == 0) continue;
      const plan::Node* a = p->topo.node(l.a.node);
      const plan::Node* b = p->topo.node(l.b.node);
      if (!a || !b || (a->host != me->name && b->host != me->name)) continue;
      const std::string& other = a->host == me->name ? b->host : a->host;
      const int need = l.emulated.mtu + plan::kVxlanOverhead;
      for (auto& peer : peers)
        if (peer.host == other && need > peer.mtu_needed) {
          peer.mtu_needed = need;
          peer.mtu_for = "link " + l.a.node + " <-> " + l.b.node +
                         (l.wan.empty() ? "" : " " + l.wan) + " (profile \"" + l.profile +
                         "\", mtu " + std::to_string(need) + ")";
        }
    }
    TB_TRY(capability::check_underlay(me->name, me->underlay, peers));
  }
  apply::NetlinkKernel kernel;
  auto r = up(*p, std::filesystem::absolute(o.scenario_path).string(), kernel, o.progress);
  if (!r) return std::unexpected(r.error());
  return UpReport{std::move(*p), std::move(r->state), r->seconds};
}

}  // namespace tb::lab
