#include "lab/up.h"

#include <unistd.h>

#include <filesystem>

#include "apply/netlink_kernel.h"
#include "capability/capabilities.h"
#include "lab/daemons.h"
#include "lab/lab.h"
#include "scenario/loader.h"
#include "shaping/lab_shaping.h"

namespace tb::lab {

Status require_root(const std::string& verb) {
  if (::geteuid() == 0) return {};
  return bad_input(verb +
                   " needs root (it creates network namespaces and interfaces); run it with sudo");
}

namespace {

Result<plan::Plan> compile_for(scenario::Scenario s, const plan::PlanOptions& o,
                               const plan::HostCaps& host) {
  if (!o.lab.empty()) s.lab = o.lab;
  auto p = plan::compile(s);
  if (!p) return std::unexpected(p.error());
  auto choice = plan::choose_shaping(o.shaping, host);
  if (!choice) return std::unexpected(choice.error());
  TB_TRY(shaping::add_shaping(*p, choice->backend));
  p->shaping_how = choice->how;
  if (!p->stages.empty() && !host.nfqueue)
    return bad_input("links need delay, jitter or loss that backend " + choice->backend +
                     " leaves to the userspace delay stage, but NFQUEUE does not work on this "
                     "kernel (see `testbedctl doctor`); use a kernel with netem (scripts/labvm) "
                     "or --shaping none");
  return p;
}

}  // namespace

Result<plan::Plan> make_plan(const std::string& scenario_path, const plan::PlanOptions& o,
                             const plan::HostCaps& host) {
  TB_TRY(plan::validate(o));
  auto s = scenario::load(scenario_path);
  if (!s) return std::unexpected(s.error());
  return compile_for(std::move(*s), o, host);
}

Result<UpReport> bring_up(const UpOptions& o) {
  TB_TRY(plan::validate(o.plan));
  auto s = scenario::load(o.scenario_path);
  if (!s) return std::unexpected(s.error());
  TB_TRY(require_root("up"));
  if (auto overlap = overlapping_host_routes(s->address_space); !overlap.empty())
    return bad_input("address_space " + s->address_space.to_string() +
                     " overlaps this host's route " + overlap.front() +
                     "; set [lab] address_space in " + o.scenario_path + " to a free range");
  const plan::HostCaps host = capability::host_for_plan(o.plan.rdma != "none");
  auto p = compile_for(std::move(*s), o.plan, host);
  if (!p) return std::unexpected(p.error());
  RdmaChoice rdma{false, "--rdma none"};
  if (o.plan.rdma != "none") rdma = {host.rxe, host.rxe_detail};
  apply::NetlinkKernel kernel;
  auto r = up(
      *p, std::filesystem::absolute(o.scenario_path).string(), kernel,
      [&] { return start_stages(p->lab, p->stages, p->agents, p->routers, p->fabric); }, rdma);
  if (!r) return std::unexpected(r.error());
  return UpReport{std::move(*p), std::move(r->state), r->seconds};
}

}  // namespace tb::lab
