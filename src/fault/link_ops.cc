#include "fault/link_ops.h"

#include <nlohmann/json.hpp>

#include "apply/journal.h"
#include "core/events.h"
#include "lab/daemons.h"
#include "plan/emulate.h"
#include "plan/shaping.h"
#include "shaping/backend.h"
#include "stage/netfilter_rules.h"
#include "stage/queue_spec.h"

namespace tb::fault {
namespace {

// Applies figures `f` to one direction src -> dst of a link.
// The old loss rule gives way to the new in one nft transaction: no moment without either.
// Rules from `up` carry the marker + " loss" (older labs: the bare marker). The loss rule is on
// the receiving port, in the bridge family when it is a bridge port (plan/shaping.h). Each half
// where its namespace is on this host.
Status replace_loss(const lab::LabState& st, const plan::LinkEnd& src, const plan::LinkEnd& dst,
                    const shaping::Residual& residual) {
  const plan::Node* sn = st.topo.node(src.node);
  const plan::Node* dn = st.topo.node(dst.node);
  auto here = [&](const plan::Node* n) { return st.host.empty() || n->host == st.host; };
  const std::string loss_marker = plan::stage_rule_marker(st.lab, dst.ifname, false);
  if (here(dn))
    TB_TRY(stage::replace_loss_rule(
        dn->netns, {dst.ifname, stage::loss_ppm(residual.loss_pct), false, dst.bridged},
        loss_marker + " loss", {loss_marker + " loss", loss_marker}));
  // A lab brought up before the loss rule moved into the bridge has it on the sender's egress
  // (marker + " loss"): it goes once the new one is in force.
  const std::string marker = plan::stage_rule_marker(st.lab, src.ifname, true);
  if (dst.bridged && here(sn))
    TB_TRY(stage::replace_loss_rule(sn->netns, {src.ifname, 0, true, false}, marker + " loss",
                                    {marker + " loss", marker}));
  return {};
}

// On a lab over several hosts only the parts on this host: the egress qdisc at the sender when
// it is here, the stage queue where it runs when that is here, the loss rule at the receiver when
// it is here (ends_here). `cg`: the direction's congestion figures from the plan (a lossless
// queue keeps its deep limit whatever the change; the agent restores what it finds in force).
Status apply_direction(lab::LabState& st, apply::Kernel& kernel, const plan::LinkEnd& src,
                       const plan::LinkEnd& dst, const plan::EmulatedFigures& f,
                       const shaping::Congestion& cg) {
  const plan::Node* sn = st.topo.node(src.node);
  const plan::Node* dn = st.topo.node(dst.node);
  auto here = [&](const plan::Node* n) { return st.host.empty() || n->host == st.host; };
  const bool src_here = here(sn), dst_here = here(dn);
  shaping::LinkShape shape = plan::shape_of(f);
  shape.congestion = cg;
  if (shape.rate > plan::kHostVethRate) shape.rate = Rate{0};
  shaping::Residual residual{shape.delay, shape.jitter, shape.loss_pct};
  if (!st.shaping.empty() && st.shaping != "none") {
    auto qp = shaping::plan_qdiscs(shape, st.shaping);
    if (!qp) return std::unexpected(qp.error());
    residual = qp->residual;
    const plan::SetShape op{sn->netns, src.ifname, shape, st.shaping};
    if (src_here) {
      TB_TRY(qp->nodes.empty() ? kernel.undo(op) : kernel.submit(op));
      TB_TRY(kernel.sync());
    }
  } else if (shape.rate.bps > 0 || !residual.empty()) {
    return bad_input("lab " + st.lab + " was built without shaping (--shaping none)");
  }
  // What the backend leaves over goes to the stage queue and loss rule of this direction.
  const plan::Node* at = dst.bridged ? sn : dn;
  const std::string& ifname = dst.bridged ? src.ifname : dst.ifname;
  if (!here(at)) return dst_here ? replace_loss(st, src, dst, residual) : Status{};
  const std::string marker = plan::stage_rule_marker(st.lab, ifname, dst.bridged);
  const std::string key = src.node + ":" + src.ifname + " -> " + dst.node + ":" + dst.ifname;
  plan::StageQueue* queue = nullptr;
  plan::Stage* stage = nullptr;
  for (auto& s : st.stages)
    for (auto& q : s.queues)
      if (q.link == key) queue = &q, stage = &s;
  const bool delayed = residual.delay.ns > 0 || residual.jitter.ns > 0;
  if (delayed && !queue) {
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
    TB_TRY(lab::refresh_stage(st.lab, *stage));
    TB_TRY(stage::add_queue_rule(at->netns, {ifname, num, dst.bridged}, marker + " queue"));
  } else if (queue && (delayed || queue->mark >= 0)) {
    // A marking queue (ecn) stays with no delay left: it marks what leaves the switch port.
    queue->delay = residual.delay;
    queue->jitter = residual.jitter;
    TB_TRY(lab::refresh_stage(st.lab, *stage));
  } else if (queue) {
    // Zero is zero: nothing left to delay, so the direction leaves the stage altogether (no
    // round trip through it, no fail-closed drop when it dies). The rule first, so no packet is
    // steered to a queue being unbound; the stage hands back what it holds, then unbinds. A
    // later delay makes a queue and rule again (above). The stage process stays, maybe idle.
    TB_TRY(stage::remove_marked_rules(at->netns, marker + " queue"));
    const uint16_t num = queue->queue;
    std::erase_if(stage->queues, [&](const plan::StageQueue& q) { return q.queue == num; });
    TB_TRY(lab::refresh_stage(st.lab, *stage));
  }
  return dst_here || src_here ? replace_loss(st, src, dst, residual) : Status{};
}

Status restore_routes(const lab::LabState& st, apply::Kernel& kernel, const plan::Link& link) {
  auto ops = apply::Journal::read(lab::journal_path(st.lab));
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

// The marker of a link direction's blackhole rule: the receiving port's stage rule marker plus
// " blackhole", so `down`'s sweep by lab marker removes it, and figure changes (" loss") never
// touch it. The rule is on that port, in the bridge family when it is a bridge port.
std::string blackhole_marker(const lab::LabState& st, const plan::LinkEnd& dst) {
  return plan::stage_rule_marker(st.lab, dst.ifname, false) + " blackhole";
}

// Where labs brought up before that kept it: the sender's egress, under the egress marker.
std::string legacy_blackhole_marker(const lab::LabState& st, const plan::LinkEnd& dst) {
  return plan::stage_rule_marker(st.lab, dst.ifname, true) + " blackhole";
}

// For an event on a link this host holds one end of: which, and whose the other is.
std::string here_part(const EndsHere& e, const plan::Link& l) {
  const plan::LinkEnd& mine = e.a ? l.a : l.b;
  return "host " + e.here + "'s end " + mine.node + ":" + mine.ifname + " only (the other is on " +
         "host " + e.far_host() + ")";
}

}  // namespace

std::string events_path(const std::string& lab) {
  return lab::lab_dir(lab) + "/events.jsonl";
}

std::string EndsHere::far_host() const {
  if (a == b) return "";
  return a ? b_host : a_host;
}

std::string EndsHere::elsewhere(const plan::Link& l) const {
  if (both()) return "";
  if (none())
    return "link " + lab::link_key(l) + " is on host " + a_host +
           (b_host != a_host ? " and host " + b_host : "") + ", not on this one (host " + here +
           ")";
  const plan::LinkEnd& far = a ? l.b : l.a;
  return "the far end " + far.node + ":" + far.ifname + " is on host " + far_host() +
         " (a VXLAN tunnel): this host acted on its own end; run the same command on host " +
         far_host() + " for the other";
}

EndsHere ends_here(const lab::LabState& st, const plan::Link& l) {
  EndsHere e;
  e.here = st.host;
  const plan::Node* na = st.topo.node(l.a.node);
  const plan::Node* nb = st.topo.node(l.b.node);
  e.a_host = na ? na->host : "";
  e.b_host = nb ? nb->host : "";
  if (st.host.empty()) return e;
  e.a = e.a_host == st.host;
  e.b = e.b_host == st.host;
  return e;
}

Status require_an_end_here(const lab::LabState& st, const plan::Link& l) {
  const auto e = ends_here(st, l);
  if (!e.none()) return {};
  return bad_input(e.elsewhere(l) + " of lab " + st.lab + "; run it on host " + e.a_host);
}

Status set_link_state(const lab::LabState& st, apply::Kernel& kernel, size_t idx, bool up,
                      int64_t* first_effect_ns) {
  const plan::Link& link = st.topo.links[idx];
  TB_TRY(require_an_end_here(st, link));
  const auto here = ends_here(st, link);
  // A tunnel's end on another host is that host's to take down: this end down stops the traffic
  // both ways (the far end's packets find no device here).
  std::vector<apply::IfaceRef> ends;
  if (here.a) ends.push_back({st.topo.node(link.a.node)->netns, link.a.ifname});
  if (here.b) ends.push_back({st.topo.node(link.b.node)->netns, link.b.ifname});
  // Taking an interface down makes the kernel delete the routes through it (multipath routes
  // only lose that next hop); bringing it up puts back the plan's routes, once the ends here
  // have reported up (apply::Kernel::set_links_up). The end brought up first starts sending only
  // when the kernel's linkwatch work reaches it: a route put back before that can have a
  // neighbour's first ARP reply dropped there, and everything for that neighbour waits for the
  // kernel to ask again a second later (the likeliest reading of a dual-ToR flap in a suite run
  // here: its workload stalled 1003 ms, and every probe sent after the up came back about 1 s
  // late, all together).
  int64_t waited_us = 0;
  if (up) {
    auto w = kernel.set_links_up(ends, kLinkUpWaitMs, first_effect_ns);
    if (!w) return std::unexpected(w.error());
    waited_us = *w;
    TB_TRY(restore_routes(st, kernel, link));
  } else {
    for (const auto& e : ends) {
      TB_TRY(kernel.set_link_up(e.netns, e.ifname, false));
      if (first_effect_ns && *first_effect_ns == 0) *first_effect_ns = monotonic_ns();
    }
  }
  nlohmann::json e{{"event", up ? "link_up" : "link_down"}, {"link", lab::link_key(link)}};
  if (up) {
    if (waited_us >= 0)
      e["reported_up_after_us"] = waited_us;
    else
      e["not_reported_up_after_ms"] = kLinkUpWaitMs;
  }
  if (!here.both()) e["host_part"] = here_part(here, link);
  (void)append_event(events_path(st.lab), e);
  return {};
}

plan::EmulatedFigures current_figures(const lab::LabState& st, size_t idx) {
  const plan::Link& link = st.topo.links[idx];
  auto overrides = lab::load_link_overrides(st.lab);
  if (auto it = overrides.find(lab::link_key(link)); it != overrides.end()) {
    plan::EmulatedFigures f = it->second;
    f.qos = link.emulated.qos;  // QoS classes are the scenario's; links.json keeps the figures
    return f;
  }
  return link.emulated;
}

Result<plan::EmulatedFigures> change_link(lab::LabState& st, apply::Kernel& kernel, size_t idx,
                                          bool reset, const lab::FigureChange& change) {
  const plan::Link& link = st.topo.links[idx];
  TB_TRY(require_an_end_here(st, link));
  const auto here = ends_here(st, link);
  const std::string key = lab::link_key(link);
  auto overrides = lab::load_link_overrides(st.lab);
  const plan::EmulatedFigures next =
      reset ? link.emulated : lab::apply_change(current_figures(st, idx), change);
  // The congestion agent pauses a lossless link by its rate limiter: without one there is
  // nothing to pause (the plan refuses lossless at host speed the same way).
  if (link.emulated.congestion.model == "lossless" && next.rate.bps == 0)
    return bad_input("link set " + key +
                     ": --rate 0 (unlimited) on a lossless link: the congestion agent pauses it "
                     "through its rate limiter; give it a rate, or make its profile congestion = "
                     "\"droptail\" in the scenario");
  for (int dir = 0; dir < 2; ++dir)
    if (auto r = apply_direction(st, kernel, dir ? link.b : link.a, dir ? link.a : link.b, next,
                                 dir ? link.emulated.congestion.ba : link.emulated.congestion.ab);
        !r)
      return std::unexpected(
          with_context(r.error(), std::string("link ") + (reset ? "reset " : "set ") + key));
  if (reset)
    overrides.erase(key);
  else
    overrides[key] = next;
  TB_TRY(lab::save_link_overrides(st.lab, overrides));
  TB_TRY(lab::save_state(st));  // stage queues
  nlohmann::json e{{"event", reset ? "link_reset" : "link_set"},
                   {"link", key},
                   {"rate_bps", next.rate.bps},
                   {"delay_ns", next.delay.ns},
                   {"jitter_ns", next.jitter.ns},
                   {"loss_pct", next.loss_pct}};
  if (!here.both()) e["host_part"] = here_part(here, link);
  (void)append_event(events_path(st.lab), e);
  return next;
}

Status set_blackhole(const lab::LabState& st, size_t idx, bool on, int64_t* first_effect_ns) {
  const plan::Link& link = st.topo.links[idx];
  TB_TRY(require_an_end_here(st, link));
  const auto here = ends_here(st, link);
  for (int dir = 0; dir < 2; ++dir) {
    const plan::LinkEnd& src = dir ? link.b : link.a;
    const plan::LinkEnd& dst = dir ? link.a : link.b;
    // The rule drops at the receiving port: a bridge port's in the bridge family, so the
    // sender sees a silent loss, not a local error. A receiving end on another host is that
    // host's: here, the direction this host receives.
    if (!(dir ? here.a : here.b)) continue;
    const plan::Node* at = st.topo.node(dst.node);
    const std::string marker = blackhole_marker(st, dst);
    TB_TRY(stage::remove_marked_rules(at->netns, marker));
    if (on)
      TB_TRY(stage::add_loss_rule(at->netns, {dst.ifname, stage::kLossModulus, false, dst.bridged},
                                  marker));
    if (first_effect_ns && *first_effect_ns == 0) *first_effect_ns = monotonic_ns();
    if (!on && dst.bridged && (dir ? here.b : here.a))
      TB_TRY(stage::remove_marked_rules(st.topo.node(src.node)->netns,
                                        legacy_blackhole_marker(st, dst)));
  }
  nlohmann::json e{{"event", on ? "blackhole_on" : "blackhole_off"}, {"link", lab::link_key(link)}};
  if (!here.both()) e["host_part"] = here_part(here, link);
  (void)append_event(events_path(st.lab), e);
  return {};
}

}  // namespace tb::fault
