#include "plan/rxe.h"

#include <cstdio>
#include <functional>

namespace tb::plan {
namespace {

constexpr size_t kMaxName = 63;  // IB_DEVICE_NAME_MAX - 1

}  // namespace

std::vector<RailNic> rail_nics(const Topology& topo) {
  std::vector<RailNic> out;
  for (const auto& l : topo.links) {
    if (l.tier != Tier::kScaleOut) continue;
    for (const LinkEnd* e : {&l.a, &l.b}) {
      const Node* n = topo.node(e->node);
      if (!n || n->kind != NodeKind::kGpu || !e->addr) continue;
      out.push_back(RailNic{n->name, n->netns, e->ifname, e->addr->addr});
    }
  }
  return out;
}

std::string rxe_name(const std::string& netns, const std::string& ifname) {
  std::string name = netns + "-" + ifname;
  if (name.size() <= kMaxName) return name;
  char h[17];
  std::snprintf(h, sizeof h, "%016zx", std::hash<std::string>{}(name));
  return "tbrxe-" + std::string(h);
}

}  // namespace tb::plan
