#include "plan/shaping.h"

#include <map>

#include "plan/emulate.h"
#include "plan/plan.h"
#include "shaping/backend.h"
#include "stage/netfilter_rules.h"
#include "stage/queue_spec.h"

namespace tb::plan {

using shaping::LinkShape;

LinkShape shape_of(const EmulatedFigures& f) {
  return LinkShape{f.rate, f.delay, f.jitter, f.loss_pct, f.mtu};
}

std::vector<SetShape> shape_ops(const Topology& topo, const std::string& backend) {
  std::vector<SetShape> out;
  out.reserve(topo.links.size() * 2);
  for (const auto& link : topo.links) {
    const LinkShape shape = shape_of(link.emulated);
    for (const LinkEnd* end : {&link.a, &link.b}) {
      const Node* node = topo.node(end->node);
      TB_CHECK(node != nullptr);
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

bool nothing_to_shape(const LinkShape& s) {
  return s.rate.bps == 0 && s.delay.ns == 0 && s.jitter.ns == 0 && s.loss_pct == 0;
}

}  // namespace

Status add_shaping(Plan& p, const std::string& backend) {
  if (backend.empty() || backend == "none") return {};
  if (!shaping::find_backend(backend))
    return bad_input("shaping backend \"" + backend + "\" is unknown; use one of " +
                     shaping::backend_kinds());
  p.shaping = backend;
  std::map<std::string, size_t> stage_of;  // netns -> index in stages
  std::vector<Stage> stages;
  std::vector<Op> shapes, rules;
  bool delayed = false;
  for (const auto& l : p.topo.links) {
    for (int dir = 0; dir < 2; ++dir) {
      const LinkEnd& src = dir == 0 ? l.a : l.b;
      const LinkEnd& dst = dir == 0 ? l.b : l.a;
      const Node* sn = p.topo.node(src.node);
      const Node* dn = p.topo.node(dst.node);
      LinkShape shape = shape_of(l.emulated);
      if (shape.rate > kHostVethRate) shape.rate = Rate{0};
      if (nothing_to_shape(shape)) continue;
      auto qp = shaping::plan_qdiscs(shape, backend);
      if (!qp)
        return std::unexpected(with_context(qp.error(), "shape " + src.node + ":" + src.ifname));
      if (!qp->nodes.empty()) shapes.push_back(SetShape{sn->netns, src.ifname, shape, backend});
      delayed = delayed || shape.delay >= kBigDelay;
      if (qp->residual.empty()) continue;
      const bool egress = dst.bridged;
      const Node* at = egress ? sn : dn;
      const std::string& ifname = egress ? src.ifname : dst.ifname;
      AddStageRule rule{at->netns, ifname, egress, 0, stage::loss_ppm(qp->residual.loss_pct), ""};
      if (qp->residual.delay.ns > 0 || qp->residual.jitter.ns > 0) {
        auto [it, fresh] = stage_of.try_emplace(at->netns, stages.size());
        if (fresh) stages.push_back(Stage{at->netns, at->name, {}});
        Stage& st = stages[it->second];
        rule.queue = static_cast<uint16_t>(st.queues.size() + 1);
        const Duration hold{qp->residual.delay.ns + 4 * qp->residual.jitter.ns};
        st.queues.push_back(
            StageQueue{rule.queue, qp->residual.delay, qp->residual.jitter,
                       stage::queue_maxlen_for(shape.rate, hold, shape.mtu),
                       src.node + ":" + src.ifname + " -> " + dst.node + ":" + dst.ifname});
      }
      rule.marker = stage_rule_marker(p.lab, ifname, egress);
      rules.push_back(std::move(rule));
    }
  }
  if (delayed)
    for (const auto& n : p.topo.nodes)
      if (n.kind == NodeKind::kGpu || n.kind == NodeKind::kServer) {
        p.ops.push_back(SetSysctl{n.netns, "net/ipv4/tcp_rmem", kTcpMem});
        p.ops.push_back(SetSysctl{n.netns, "net/ipv4/tcp_wmem", kTcpMem});
      }
  for (auto* group : {&shapes, &rules})
    for (auto& op : *group) p.ops.push_back(std::move(op));
  for (auto& st : stages) p.ops.push_back(StartDaemon{st.netns, std::move(st)});
  return {};
}

}  // namespace tb::plan
