#include "shaping/shape_ops.h"

#include "core/error.h"

namespace tb::shaping {

LinkShape shape_of(const plan::EmulatedFigures& f) {
  return LinkShape{f.rate, f.delay, f.jitter, f.loss_pct, f.mtu};
}

std::vector<plan::SetShape> shape_ops(const plan::Topology& topo, const std::string& backend) {
  std::vector<plan::SetShape> out;
  out.reserve(topo.links.size() * 2);
  for (const auto& link : topo.links) {
    const LinkShape shape = shape_of(link.emulated);
    for (const plan::LinkEnd* end : {&link.a, &link.b}) {
      const plan::Node* node = topo.node(end->node);
      TB_CHECK(node != nullptr);
      out.push_back(plan::SetShape{node->netns, end->ifname, shape, backend});
    }
  }
  return out;
}

}  // namespace tb::shaping
