// `tb-probe agent`: the active-probing failover agent ([failover] mode = "agent"), one per
// transit router, under the lab's supervisor. Like BFD's asynchronous mode, it sends a hello
// out every WAN path it is given (to the peer router's agent, every interval) and listens for
// the peer's hellos on one UDP port; when none came on a path for `misses` intervals it
// withdraws that path's routes (RTM_DELROUTE), so traffic takes the next metric (the backup
// path); after `misses` hellos again it puts them back. Each switch is an event (agent_path_down /
// agent_path_up) on CLOCK_MONOTONIC in the lab's events.jsonl. Runs until SIGTERM. Single-threaded.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"

namespace tb::failover {

struct AgentPath {
  std::string name;  // "ec"
  std::string dev;   // interface the probes and the routes use
  std::string peer;  // the peer router's address on that link (probe target and gateway)
  std::vector<std::string> dsts;  // prefixes routed over it ("198.18.2.0/24")
  int metric = 0;
};

struct AgentConfig {
  std::string node;  // "hz/tr", for events
  uint16_t port = 0;
  int64_t interval_ns = 10'000'000;
  int misses = 3;
  std::vector<AgentPath> paths;
};

nlohmann::json to_json(const AgentConfig& c);
Result<AgentConfig> agent_config_from_json(const nlohmann::json& j);

Status run_agent(const AgentConfig& c, const std::string& events_path,
                 const std::atomic<bool>& stop);

}  // namespace tb::failover
