// The topology a plan builds: nodes (one namespace each) and links (one veth pair each) with
// their tier, profile and both real-world and emulated figures. `status`, `graph` and the host
// files are derived from it; it is saved with the lab's state so they work without the scenario.
//
// Plain values; thread-safe to copy and read.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/ipv4.h"
#include "core/units.h"
#include "shaping/link_shape.h"

namespace tb::plan {

enum class NodeKind { kGpu, kServer, kTor, kSpine, kVpc, kTransitRouter };
enum class Tier { kScaleUp, kScaleOut, kAggregation, kFrontend, kUplink, kWan };

const char* to_string(NodeKind k);
const char* to_string(Tier t);

struct Node {
  std::string name;   // "hz/s0/g3"
  std::string netns;  // "tb-hzbj-hz-s0-g3"
  NodeKind kind = NodeKind::kGpu;
  std::string region;
  int server = -1;  // GPUs and servers
  int index = -1;   // GPU index (= rail), ToR rail, spine number
  // Addresses by role: "nvl", "rail", "fe", "lo" (router id), "gw" ...
  std::vector<std::pair<std::string, Prefix>> addrs;
  std::string host;  // the [[host]] it is built on; "" when the scenario declares no hosts
};

// Link figures after scaling. Notes say what could not be emulated, e.g.
// "delay 2us is below what the kernel can emulate (10us); not emulated".
// A link's congestion model as emulated (issue 32; plan/congestion.h): the profile's real-world
// thresholds scaled to lab bytes (emulate), then each direction's floored figures
// (congestion_plan; a direction that is neither a polled switch egress nor a paused host queue
// stays empty).
struct EmulatedCongestion {
  std::string model = "droptail";                        // "droptail", "lossless" or "ecn"
  uint64_t xoff = 0, xon = 0, headroom = 0, buffer = 0;  // scaled; 0 = the floors decide
  uint64_t kmin = 0, kmax = 0;                           // ecn, scaled; 0 = the floors decide
  double pmax = 0;                                       // ecn: 0..1
  shaping::Congestion ab, ba;                            // a's egress (a -> b), b's (b -> a)
};

struct EmulatedFigures {
  Rate rate;
  Duration delay;
  Duration jitter;
  double loss_pct = 0;
  int mtu = 1500;
  std::vector<std::string> notes;
  bool reorder = false;  // jitter may reorder (scenario jitter_mode = "reorder")
  shaping::Qos qos;      // QoS classes under the rate ([qos]; WAN links only)
  EmulatedCongestion congestion;
};

struct RealFigures {
  Rate rate;
  Duration delay;
  Duration jitter;
  double loss_pct = 0;
  int mtu = 1500;
};

struct LinkEnd {
  std::string node;
  std::string ifname;
  std::optional<Prefix> addr;
  bool bridged = false;  // a bridge port: its frames never reach IP in that namespace
};

struct Link {
  LinkEnd a, b;
  Tier tier = Tier::kScaleUp;
  std::string profile;  // profile name in the scenario
  std::string wan;      // WAN link name, for tier kWan
  std::string role;     // "primary" / "backup" for WAN links, "" otherwise
  RealFigures real;
  EmulatedFigures emulated;
  // A link whose ends are on different hosts is a VXLAN tunnel with this VNI (0: a veth pair
  // on one host); its emulated MTU is the profile's less kVxlanOverhead.
  uint32_t vni = 0;
};

// Bytes VXLAN adds to each frame on an IPv4 underlay: outer IPv4 20 + UDP 8 + VXLAN 8 + the
// inner Ethernet header 14 (RFC 7348).
inline constexpr int kVxlanOverhead = 50;

// Topology::node's index: name -> position in `nodes`, built on first use and rebuilt when the
// vector's size changed or a hit no longer names what it found. A copy starts empty (it indexes
// its own vector). A lookup takes the mutex: plans are read from several threads.
class NodeIndex {
 public:
  NodeIndex() = default;
  NodeIndex(const NodeIndex&) {}
  NodeIndex(NodeIndex&&) noexcept {}
  NodeIndex& operator=(const NodeIndex&) {
    clear();
    return *this;
  }
  NodeIndex& operator=(NodeIndex&&) noexcept {
    clear();
    return *this;
  }
  const Node* find(const std::vector<Node>& nodes, const std::string& name) const;

 private:
  void clear() {
    std::lock_guard lock(mutex_);
    positions_.clear();
    size_ = 0;
  }
  void rebuild(const std::vector<Node>& nodes) const;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, size_t> positions_;
  mutable size_t size_ = 0;
};

struct Topology {
  std::vector<Node> nodes;
  std::vector<Link> links;
  NodeIndex index;  // node()'s: a plan of 2,048 GPUs asked ~10^5 times, each a walk of `nodes`

  // The node named `name` (the first, were two so named); nullptr when none is.
  const Node* node(const std::string& name) const { return index.find(nodes, name); }
};

// `n`'s address of `role` ("rail", "nvl", "fe", ...); none when it has no such address.
std::optional<Prefix> address_of(const Node& n, std::string_view role);

nlohmann::json to_json(const Topology& t);
// QoS classes as the journal and the lab's state keep them ([] for none).
nlohmann::json qos_to_json(const shaping::Qos& q);
shaping::Qos qos_from_json(const nlohmann::json& j);
// One direction's congestion figures as the journal and the lab's state keep them ({} for none),
// and as a plan line shows them: "congestion lossless xoff 255K xon 55K limit 2.2M (4 feeders)",
// "congestion lossless limit 16.8M (host queue)"; "" for none.
nlohmann::json to_json(const shaping::Congestion& c);
shaping::Congestion shape_congestion_from_json(const nlohmann::json& j);
std::string congestion_text(const shaping::Congestion& c);
Topology topology_from_json(const nlohmann::json& j);

}  // namespace tb::plan
