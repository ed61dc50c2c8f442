#include "plan/shaping.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "plan/congestion.h"
#include "plan/emulate.h"
#include "plan/plan.h"
#include "shaping/backend.h"
#include "shaping/sizing.h"
#include "stage/netfilter_rules.h"
#include "stage/queue_spec.h"

namespace tb::plan {

using shaping::LinkShape;

LinkShape shape_of(const EmulatedFigures& f) {
  return LinkShape{f.rate, f.delay, f.jitter, f.loss_pct, f.mtu, f.reorder, f.qos};
}

shaping::Qos qos_classes(const scenario::Qos& q) {
  shaping::Qos out;
  if (!q.enabled) return out;
  for (const auto& c : q.classes) {
    if (c.name == q.default_class) out.default_class = out.classes.size();
    out.classes.push_back({c.name, c.share, c.ceiling, c.priority, c.dscp});
  }
  return out;
}

std::vector<SetShape> shape_ops(const Topology& topo, const std::string& backend) {
  std::vector<SetShape> out;
  out.reserve(topo.links.size() * 2);
  for (const auto& link : topo.links) {
    LinkShape shape = shape_of(link.emulated);
    for (const LinkEnd* end : {&link.a, &link.b}) {
      const Node* node = topo.node(end->node);
      TB_CHECK(node != nullptr);
      shape.congestion = end == &link.a ? link.emulated.congestion.ab : link.emulated.congestion.ba;
      out.push_back(SetShape{node->netns, end->ifname, shape, backend});
    }
  }
  return out;
}

namespace {

// Per-namespace TCP buffer ceiling when any link is delayed: 2 x BDP of the slowest-to-fill
// path must fit (limits.md 4b: 4 MB default caps a 25 ms path at ~1.1 Gbit/s).
constexpr const char* kTcpMem = "4096 131072 67108864";
constexpr Duration kBigDelay{1'000'000};

// TCP small queues (tcp_output.c tcp_small_queue_check) stop a socket from sending while more
// than limit = max(2 skbs, pacing_rate >> 10) of its bytes are below TCP, and
// min(limit, tcp_limit_output_bytes) for a flow not paced by its congestion control. An skb
// keeps its socket until something orphans it: netem does (skb_orphan_partial), IP input does
// (ip_rcv_core), a veth or a bridge does not. The stage's hold on a sender's egress (the
// receiving port is a bridge port) is therefore counted against every local TCP sender behind
// it, and a hold longer than about 1 ms of pacing rate (120% of cwnd/srtt) throttles it: a
// 1 Gbit/s link with a 2.5 ms egress hold gave cubic 674-920 Mbit/s of an ideal 956 on the
// reference host. The sender's namespace gets a pacing ratio that covers twice the hold and a
// byte limit of twice the bytes held; both sysctls are per namespace. Congestion controls that
// pace themselves (bbr) set their own pacing rate and are not covered (docs/scenario.md).
constexpr Duration kTsqPacingWindow{1'024'000};  // pacing_rate >> 10 (sk_pacing_shift 10)
constexpr int kPacingSsRatio = 200;              // the kernel's defaults, percent
constexpr int kPacingCaRatio = 120;
constexpr int kMaxPacingRatio = 1000;  // sysctl_net_ipv4.c: extra2 = 1000
// tcp_sk_init's default on current kernels (4 MiB; 1 MiB before): the byte limit is never set
// below it.
constexpr uint64_t kTcpLimitOutputBytes = 4u << 20;

struct EgressHold {
  Duration hold;       // longest delay + 4 x jitter held on this namespace's egress
  uint64_t bytes = 0;  // most bytes such a hold keeps at its link's rate
};

// The per-namespace TSQ ops for the egress holds of `holds` at or above kBigDelay.
void add_tsq_sysctls(const std::map<std::string, EgressHold>& holds, std::vector<Op>& ops) {
  for (const auto& [netns, h] : holds) {
    if (h.hold < kBigDelay) continue;
    const double need =
        100.0 * 2.0 * static_cast<double>(h.hold.ns) / static_cast<double>(kTsqPacingWindow.ns);
    const int ratio = std::min(kMaxPacingRatio, static_cast<int>(std::ceil(need)));
    ops.push_back(SetSysctl{netns, "net/ipv4/tcp_limit_output_bytes",
                            std::to_string(std::max(kTcpLimitOutputBytes, 2 * h.bytes))});
    ops.push_back(SetSysctl{netns, "net/ipv4/tcp_pacing_ss_ratio",
                            std::to_string(std::max(kPacingSsRatio, ratio))});
    ops.push_back(SetSysctl{netns, "net/ipv4/tcp_pacing_ca_ratio",
                            std::to_string(std::max(kPacingCaRatio, ratio))});
  }
}

bool nothing_to_shape(const LinkShape& s) {
  return s.rate.bps == 0 && s.delay.ns == 0 && s.jitter.ns == 0 && s.loss_pct == 0;
}

// "delay 5ms, loss 1%": the residual's figures, for errors.
std::string residual_text(const shaping::Residual& r) {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (r.delay.ns) add("delay " + format_duration(r.delay));
  if (r.jitter.ns) add("jitter " + format_duration(r.jitter));
  if (r.loss_pct > 0) add(fmt::format("loss {:g}%", r.loss_pct));
  return s;
}

// Both ends bridge ports: the stage's rule would sit on the sender's POSTROUTING, which bridged
// frames never traverse (nor the receiver's PREROUTING), so the residual would not be emulated.
Status bridged_both_ends(const Link& l, const shaping::Residual& r, const std::string& backend,
                         const LinkWhere& where) {
  return bad_input((where ? where(l) : "") + "link " + l.a.node + ":" + l.a.ifname + " <-> " +
                   l.b.node + ":" + l.b.ifname + " (profile \"" + l.profile +
                   "\"): both ends are bridge ports, so backend " + backend +
                   " cannot emulate its " + residual_text(r) +
                   ": the userspace delay stage holds packets at an IP hook (the receiving "
                   "port's PREROUTING or the sending port's POSTROUTING) and frames between two "
                   "bridges pass neither; use the netem backend, or give the profile no delay, "
                   "jitter or loss");
}

}  // namespace

Status add_shaping(Plan& p, const std::string& backend, const LinkWhere& where) {
  if (backend.empty() || backend == "none") return {};
  if (!shaping::find_backend(backend))
    return bad_input("shaping backend \"" + backend + "\" is unknown; use one of " +
                     shaping::backend_kinds());
  p.shaping = backend;
  std::map<std::string, size_t> stage_of;  // netns -> index in stages
  std::vector<Stage> stages;
  std::vector<Op> shapes, rules;
  bool delayed = false;
  std::map<std::string, EgressHold> egress_holds;  // netns -> its longest egress hold
  for (auto& l : p.topo.links) {
    for (int dir = 0; dir < 2; ++dir) {
      const LinkEnd& src = dir == 0 ? l.a : l.b;
      const LinkEnd& dst = dir == 0 ? l.b : l.a;
      const Node* sn = p.topo.node(src.node);
      const Node* dn = p.topo.node(dst.node);
      LinkShape shape = shape_of(l.emulated);
      if (shape.rate > kHostVethRate) shape.rate = Rate{0};
      // A lossless direction's own limit (plan/congestion.h congestion_plan).
      shape.congestion = dir == 0 ? l.emulated.congestion.ab : l.emulated.congestion.ba;
      if (!shape.qos.empty() && shape.rate.bps == 0 && dir == 0)
        l.emulated.notes.push_back(
            "QoS classes need a rate limit to share; this link runs unlimited, so its traffic is "
            "not classified");
      if (nothing_to_shape(shape)) continue;
      auto qp = shaping::plan_qdiscs(shape, backend);
      if (!qp)
        return std::unexpected(with_context(qp.error(), "shape " + src.node + ":" + src.ifname));
      if (!qp->nodes.empty()) shapes.push_back(SetShape{sn->netns, src.ifname, shape, backend});
      delayed = delayed || shape.delay >= kBigDelay;
      // An ecn switch port's packets are marked by the stage queue just downstream of it, at the
      // receiving port's PREROUTING (congestion_plan numbered its slot only where that exists):
      // a queue with no residual delay then only marks (design-congestion.md section 4).
      const int mark =
          shape.congestion.model == "ecn" && !dst.bridged ? shape.congestion.mark_slot : -1;
      if (qp->residual.empty() && mark < 0) continue;
      if (src.bridged && dst.bridged) return bridged_both_ends(l, qp->residual, backend, where);
      if (shape.reorder && qp->residual.jitter.ns > 0)
        return bad_input((where ? where(l) : "") + "link " + l.a.node + ":" + l.a.ifname + " <-> " +
                         l.b.node + ":" + l.b.ifname + " (profile \"" + l.profile +
                         "\"): jitter_mode = \"reorder\" needs the netem backend; backend " +
                         backend +
                         " leaves the jitter to the userspace delay stage, which releases "
                         "packets in the order they came");
      // The queue rule: at the receiving port's PREROUTING, or the sender's egress when that
      // port is a bridge port. The loss rule: on the receiving port itself, in the bridge family
      // when it is a bridge port (a drop on the sender's egress is a local error, not a loss).
      const bool egress = dst.bridged;
      const Node* at = egress ? sn : dn;
      const std::string& ifname = egress ? src.ifname : dst.ifname;
      const uint32_t loss = stage::loss_ppm(qp->residual.loss_pct);
      AddStageRule rule{at->netns, ifname, egress, 0, egress ? 0 : loss, ""};
      if (qp->residual.delay.ns > 0 || qp->residual.jitter.ns > 0 || mark >= 0) {
        auto [it, fresh] = stage_of.try_emplace(at->netns, stages.size());
        if (fresh) stages.push_back(Stage{at->netns, at->name, {}});
        Stage& st = stages[it->second];
        if (mark >= 0) st.mark_table = mark_table_path(p.lab);
        rule.queue = static_cast<uint16_t>(st.queues.size() + 1);
        const Duration hold{qp->residual.delay.ns + 4 * qp->residual.jitter.ns};
        if (egress && hold >= kBigDelay)
          l.emulated.notes.push_back(
              "the " + src.node + " -> " + dst.node + " delay is held on " + src.node + ":" +
              src.ifname +
              "'s egress (the other end is a bridge port), where TCP small queues count it "
              "against that node's own TCP senders: the plan widens them for congestion "
              "controls that do not pace themselves (cubic, reno); one that does (bbr) keeps "
              "about 1 ms of its rate in flight there and can fall short of the rate");
        if (egress) {
          EgressHold& h = egress_holds[at->netns];
          const Rate r = shape.rate.bps > 0 ? shape.rate : shaping::kHostVethRate;
          h.hold = std::max(h.hold, hold);
          h.bytes = std::max(h.bytes, shaping::bytes_per_second(r) *
                                          static_cast<uint64_t>(hold.ns) / 1'000'000'000);
        }
        st.queues.push_back(
            StageQueue{rule.queue, qp->residual.delay, qp->residual.jitter,
                       stage::queue_maxlen_for(shape.rate, hold, shape.mtu),
                       src.node + ":" + src.ifname + " -> " + dst.node + ":" + dst.ifname, mark});
      }
      rule.marker = stage_rule_marker(p.lab, ifname, egress);
      if (rule.queue || rule.loss_ppm) rules.push_back(std::move(rule));
      if (egress && loss)
        rules.push_back(AddStageRule{dn->netns, dst.ifname, false, 0, loss,
                                     stage_rule_marker(p.lab, dst.ifname, false)});
    }
  }
  if (delayed)
    for (const auto& n : p.topo.nodes)
      if (n.kind == NodeKind::kGpu || n.kind == NodeKind::kServer) {
        p.ops.push_back(SetSysctl{n.netns, "net/ipv4/tcp_rmem", kTcpMem});
        p.ops.push_back(SetSysctl{n.netns, "net/ipv4/tcp_wmem", kTcpMem});
      }
  add_tsq_sysctls(egress_holds, p.ops);
  for (auto* group : {&shapes, &rules})
    for (auto& op : *group) p.ops.push_back(std::move(op));
  for (auto& st : stages) p.ops.push_back(StartDaemon{st.netns, std::move(st)});
  return {};
}

}  // namespace tb::plan
