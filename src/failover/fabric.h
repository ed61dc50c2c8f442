// `tb-probe fabric`: dual-ToR host-route withdrawal for one region ([failover] host_routes =
// "withdraw"), under the lab's supervisor. In HPN each ToR announces its GPUs' /32s by BGP and
// withdraws one when the GPU's port goes down, so the spines stop sending that GPU's traffic to
// a ToR that cannot deliver it. This agent plays that control plane from outside the routers:
// it subscribes to link and route changes in every ToR's namespace and, after each change, asks
// that ToR's kernel which route a packet to each of its GPUs would take now (`ip route get
// fibmatch`). A GPU whose packets some ToR no longer sends out its port gets a /32 on every
// spine via the ToRs that still deliver (replaced as that set changes); once every ToR delivers
// again the /32 is removed and the spines' ECMP route for the rail subnet carries it as before.
// Each change is an event (fabric_withdraw, fabric_restore; fabric_error when a spine refused)
// in the lab's events.jsonl. A recheck every 500 ms covers a lost notification.
// Runs until `stop`; single-threaded.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "core/ipv4.h"

namespace tb::failover {

struct FabricConfig {
  struct Tor {
    std::string node, netns;
    std::string spine_port;  // the spines' interface toward it
    Ipv4 addr;               // the spines' onlink next hop
  };
  struct Port {
    int tor = 0;  // index into tors
    std::string port;
  };
  struct Gpu {
    std::string node;
    Ipv4 addr;
    std::vector<Port> ports;
  };
  std::string region;
  std::vector<std::string> spine_nodes, spine_netns;
  std::vector<Tor> tors;
  std::vector<Gpu> gpus;
};

nlohmann::json to_json(const FabricConfig& c);
Result<FabricConfig> fabric_config_from_json(const nlohmann::json& j);

// Which ToRs should carry a GPU's traffic, given which of its ports deliver: empty = leave it
// to the rail subnet's ECMP route (every port delivers, or none does and there is nothing
// better); else the ToR indices that deliver.
std::vector<int> fabric_next_hops(const std::vector<FabricConfig::Port>& ports,
                                  const std::vector<bool>& delivers);

Status run_fabric(const FabricConfig& c, const std::string& events_path,
                  const std::atomic<bool>& stop);

}  // namespace tb::failover
