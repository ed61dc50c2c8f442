#include "lab/live.h"

#include "apply/netlink_kernel.h"

namespace tb::lab {

Result<std::vector<apply::IfaceInfo>> interfaces_in(const std::string& netns) {
  apply::NetlinkKernel kernel;
  return kernel.interfaces(netns);
}

LiveInterfaces read_live_interfaces(const plan::Topology& t) {
  LiveInterfaces live;
  apply::NetlinkKernel kernel;
  for (const auto& n : t.nodes) {
    auto ifs = kernel.interfaces(n.netns);
    if (ifs) live[n.netns] = std::move(*ifs);
  }
  return live;
}

}  // namespace tb::lab
