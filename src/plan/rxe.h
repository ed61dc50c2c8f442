// Soft-RoCE in the plan: which NICs get an rxe device (every GPU rail NIC) and what the devices
// are called. The devices themselves are CreateRxe ops (op.h), made by apply/rxe.h.
// Thread-safe (pure).
#pragma once

#include <string>
#include <vector>

#include "core/ipv4.h"
#include "plan/topology.h"

namespace tb::plan {

// A GPU rail NIC that gets a device: node, netns, ifname and its rail address.
struct RailNic {
  std::string node, netns, ifname;
  Ipv4 addr;
};
// In topology order (scale-out links, side a then side b).
std::vector<RailNic> rail_nics(const Topology& topo);

// RDMA device name for a NIC: "<netns>-<ifname>", or a hashed form when that exceeds the kernel's
// 63 characters (IB_DEVICE_NAME_MAX).
std::string rxe_name(const std::string& netns, const std::string& ifname);

}  // namespace tb::plan
