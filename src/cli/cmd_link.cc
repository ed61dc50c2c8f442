// `testbedctl link LAB set|reset|down|up A B`: change a live link in place. Rates and qdisc
// figures are replaced in the kernel (no delete and re-add), a delay stage's queue is changed by
// rewriting its config and SIGHUP, a loss rule is swapped; every change is an event.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apply/journal.h"
#include "apply/link_change.h"
#include "apply/netlink_kernel.h"
#include "apply/state.h"
#include "cli/commands.h"
#include "core/events.h"
#include "plan/emulate.h"
#include "runner/stages.h"
#include "runner/supervisor.h"
#include "shaping/backend.h"
#include "shaping/shape_ops.h"
#include "stage/netfilter_rules.h"
#include "stage/queue_spec.h"

namespace tb::cli {
namespace {

std::string format_percent(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g%%", p);
  return buf;
}

// Applies figures `f` to one direction src -> dst of a link.
Status apply_direction(apply::LabState& st, apply::Kernel& kernel, const plan::LinkEnd& src,
                       const plan::LinkEnd& dst, const plan::EmulatedFigures& f) {
  const plan::Node* sn = st.topo.node(src.node);
  const plan::Node* dn = st.topo.node(dst.node);
  shaping::LinkShape shape = shaping::shape_of(f);
  if (shape.rate > plan::kHostVethRate) shape.rate = Rate{0};
  shaping::Residual residual{shape.delay, shape.jitter, shape.loss_pct};
  if (!st.shaping.empty() && st.shaping != "none") {
    auto qp = shaping::plan_qdiscs(shape, st.shaping);
    if (!qp) return std::unexpected(qp.error());
    residual = qp->residual;
    const plan::SetShape op{sn->netns, src.ifname, shape, st.shaping};
    TB_TRY(qp->nodes.empty() ? kernel.undo(op) : kernel.submit(op));
    TB_TRY(kernel.sync());
  } else if (shape.rate.bps > 0 || !residual.empty()) {
    return bad_input("lab " + st.lab + " was built without shaping (--shaping none)");
  }
  // What the backend leaves over goes to the stage queue and loss rule of this direction.
  const plan::Node* at = dst.bridged ? sn : dn;
  const std::string& ifname = dst.bridged ? src.ifname : dst.ifname;
  const std::string marker = plan::stage_rule_marker(st.lab, ifname, dst.bridged);
  const std::string key = src.node + ":" + src.ifname + " -> " + dst.node + ":" + dst.ifname;
  plan::StageQueue* queue = nullptr;
  plan::Stage* stage = nullptr;
  for (auto& s : st.stages)
    for (auto& q : s.queues)
      if (q.link == key) queue = &q, stage = &s;
  if ((residual.delay.ns > 0 || residual.jitter.ns > 0) && !queue) {
    // A direction the scenario did not delay: give it a queue, in the stage of its namespace
    // (a new stage when there is none), and steer it there once the stage serves it — never
    // before, or the fail-closed rule would drop the link's traffic meanwhile.
    for (auto& s : st.stages)
      if (s.netns == at->netns) stage = &s;
    if (!stage) stage = &st.stages.emplace_back(plan::Stage{at->netns, at->name, {}});
    uint16_t num = 1;
    for (const auto& q : stage->queues) num = std::max<uint16_t>(num, q.queue + 1);
    const Duration hold{residual.delay.ns + 4 * residual.jitter.ns};
    stage->queues.push_back({num, residual.delay, residual.jitter,
                             stage::queue_maxlen_for(shape.rate, hold, shape.mtu), key});
    TB_TRY(runner::refresh_stage(st.lab, *stage));
    TB_TRY(stage::add_queue_rule(at->netns, {ifname, num, dst.bridged}, marker + " queue"));
  } else if (queue) {
    queue->delay = residual.delay;
    queue->jitter = residual.jitter;
    TB_TRY(runner::refresh_stage(st.lab, *stage));
  }
  TB_TRY(stage::remove_marked_rules(at->netns, marker + " loss"));
  if (uint32_t k = stage::loss_per_10000(residual.loss_pct); k > 0)
    TB_TRY(stage::add_loss_rule(at->netns, {ifname, k, dst.bridged}, marker + " loss"));
  return {};
}

Status restore_routes(const apply::LabState& st, apply::Kernel& kernel, const plan::Link& link) {
  auto ops = apply::Journal::read(apply::journal_path(st.lab));
  if (!ops) return std::unexpected(ops.error());
  for (const auto& op : *ops) {
    const auto* r = std::get_if<plan::AddRoute>(&op);
    if (!r) continue;
    bool through = false;
    for (const auto* end : {&link.a, &link.b})
      for (const auto& nh : r->nexthops)
        through =
            through || (r->netns == st.topo.node(end->node)->netns && nh.ifname == end->ifname);
    if (!through) continue;
    auto sent = kernel.submit(op);
    if (sent) sent = kernel.sync();
    if (!sent && sent.error().sys_errno != EEXIST) return sent;
  }
  return {};
}

}  // namespace

int cmd_link(const std::string& lab, const std::string& action, const std::string& a,
             const std::string& b, const apply::FigureChange& change) {
  auto st = apply::load_state(lab);
  if (!st) return report(Error{st.error().message, 0, kExitBadInput});
  auto idx = apply::find_link(st->topo, a, b);
  if (!idx) return report(idx.error());
  if (action == "set" && change.empty())
    return report(Error{"link set needs at least one of --rate, --delay, --jitter, --loss", 0,
                        kExitBadInput});
  if (auto rc = require_root("link")) return *rc;
  auto lock = apply::LabLock::acquire(lab);
  if (!lock) return report(lock.error());
  const plan::Link& link = st->topo.links[*idx];
  const std::string key = apply::link_key(link);
  apply::NetlinkKernel kernel;
  nlohmann::json event = {{"event", "link_" + action}, {"link", key}};
  if (action == "down" || action == "up") {
    for (const auto* end : {&link.a, &link.b})
      if (auto r = kernel.set_link_up(st->topo.node(end->node)->netns, end->ifname, action == "up");
          !r)
        return report(r.error());
    // Taking an interface down makes the kernel delete the routes through it (multipath
    // routes only lose that next hop); bringing it up puts back the plan's routes.
    if (action == "up")
      if (auto r = restore_routes(*st, kernel, link); !r) return report(r.error());
  } else {
    auto overrides = apply::load_link_overrides(lab);
    plan::EmulatedFigures now = link.emulated;
    if (auto it = overrides.find(key); it != overrides.end()) now = it->second;
    const plan::EmulatedFigures next =
        action == "reset" ? link.emulated : apply::apply_change(now, change);
    for (int dir = 0; dir < 2; ++dir)
      if (auto r = apply_direction(*st, kernel, dir ? link.b : link.a, dir ? link.a : link.b, next);
          !r)
        return report(with_context(r.error(), "link " + action + " " + key));
    if (action == "reset")
      overrides.erase(key);
    else
      overrides[key] = next;
    if (auto r = apply::save_link_overrides(lab, overrides); !r) return report(r.error());
    if (auto r = apply::save_state(*st); !r) return report(r.error());  // stage queues
    event["rate_bps"] = next.rate.bps;
    event["delay_ns"] = next.delay.ns;
    event["jitter_ns"] = next.jitter.ns;
    event["loss_pct"] = next.loss_pct;
  }
  (void)append_event(apply::lab_dir(lab) + "/events.jsonl", event);
  std::printf("%s: %s\n", key.c_str(),
              action == "set" || action == "reset"
                  ? ("rate " + format_rate(Rate{event["rate_bps"]}) + ", delay " +
                     format_duration(Duration{event["delay_ns"]}) + ", jitter " +
                     format_duration(Duration{event["jitter_ns"]}) + ", loss " +
                     format_percent(event["loss_pct"].get<double>()))
                        .c_str()
                  : action.c_str());
  return kExitOk;
}

}  // namespace tb::cli
