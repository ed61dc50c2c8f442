#include "plan/topology.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace tb::plan {

const char* to_string(NodeKind k) {
  switch (k) {
    case NodeKind::kGpu:
      return "gpu";
    case NodeKind::kServer:
      return "server";
    case NodeKind::kTor:
      return "tor";
    case NodeKind::kSpine:
      return "spine";
    case NodeKind::kVpc:
      return "vpc";
    case NodeKind::kTransitRouter:
      return "transit-router";
  }
  return "?";
}

std::optional<Prefix> address_of(const Node& n, std::string_view role) {
  for (const auto& [r, p] : n.addrs)
    if (r == role) return p;
  return std::nullopt;
}

const char* to_string(Tier t) {
  switch (t) {
    case Tier::kScaleUp:
      return "scale-up";
    case Tier::kScaleOut:
      return "scale-out";
    case Tier::kAggregation:
      return "aggregation";
    case Tier::kFrontend:
      return "frontend";
    case Tier::kUplink:
      return "uplink";
    case Tier::kWan:
      return "wan";
  }
  return "?";
}

void NodeIndex::rebuild(const std::vector<Node>& nodes) const {
  positions_.clear();
  positions_.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) positions_.emplace(nodes[i].name, i);  // first wins
  size_ = nodes.size();
}

const Node* NodeIndex::find(const std::vector<Node>& nodes, const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto hit = [&]() -> const Node* {
    auto it = positions_.find(name);
    if (it == positions_.end() || it->second >= nodes.size()) return nullptr;
    const Node& n = nodes[it->second];
    return n.name == name ? &n : nullptr;
  };
  if (size_ != nodes.size()) rebuild(nodes);
  if (const Node* n = hit()) return n;
  // A miss, or a node renamed or replaced in place since the index was built: a walk, as every
  // lookup was before the index; a node found so makes the index stale.
  for (const auto& n : nodes)
    if (n.name == name) {
      rebuild(nodes);
      return &n;
    }
  return nullptr;
}

namespace {

template <class E>
E enum_from(const std::string& s, E last) {
  for (int i = 0; i <= static_cast<int>(last); ++i)
    if (s == to_string(static_cast<E>(i))) return static_cast<E>(i);
  return static_cast<E>(0);
}

nlohmann::json end_json(const LinkEnd& e) {
  nlohmann::json j = {{"node", e.node}, {"ifname", e.ifname}};
  if (e.addr) j["addr"] = e.addr->to_string();
  if (e.bridged) j["bridged"] = true;
  return j;
}

LinkEnd end_from(const nlohmann::json& j) {
  LinkEnd e{j.at("node"), j.at("ifname"), std::nullopt, j.value("bridged", false)};
  if (j.contains("addr"))
    if (auto p = parse_prefix(j.at("addr").get<std::string>())) e.addr = *p;
  return e;
}

}  // namespace

nlohmann::json to_json(const Topology& t) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : t.nodes) {
    nlohmann::json addrs = nlohmann::json::object();
    for (const auto& [role, p] : n.addrs) addrs[role] = p.to_string();
    nodes.push_back({{"name", n.name},
                     {"netns", n.netns},
                     {"kind", to_string(n.kind)},
                     {"region", n.region},
                     {"server", n.server},
                     {"index", n.index},
                     {"addrs", addrs}});
    if (!n.host.empty()) nodes.back()["host"] = n.host;
  }
  nlohmann::json links = nlohmann::json::array();
  for (const auto& l : t.links) {
    links.push_back({
        {"a", end_json(l.a)},
        {"b", end_json(l.b)},
        {"tier", to_string(l.tier)},
        {"profile", l.profile},
        {"wan", l.wan},
        {"role", l.role},
        {"real",
         {{"rate_bps", l.real.rate.bps},
          {"delay_ns", l.real.delay.ns},
          {"jitter_ns", l.real.jitter.ns},
          {"loss_pct", l.real.loss_pct},
          {"mtu", l.real.mtu}}},
        {"emulated",
         {{"rate_bps", l.emulated.rate.bps},
          {"delay_ns", l.emulated.delay.ns},
          {"jitter_ns", l.emulated.jitter.ns},
          {"loss_pct", l.emulated.loss_pct},
          {"mtu", l.emulated.mtu},
          {"notes", l.emulated.notes}}},
    });
    if (l.emulated.reorder) links.back()["emulated"]["jitter_mode"] = "reorder";
    if (!l.emulated.qos.empty()) links.back()["emulated"]["qos"] = qos_to_json(l.emulated.qos);
    if (const auto& c = l.emulated.congestion; c.model != "droptail") {
      auto& cj = links.back()["emulated"]["congestion"];
      cj = {{"model", c.model},       {"xoff", c.xoff},     {"xon", c.xon},
            {"headroom", c.headroom}, {"buffer", c.buffer}, {"ab", to_json(c.ab)},
            {"ba", to_json(c.ba)}};
      if (c.model == "ecn") {
        cj["kmin"] = c.kmin;
        cj["kmax"] = c.kmax;
        cj["pmax"] = c.pmax;
      }
    }
    if (l.vni) links.back()["vni"] = l.vni;
  }
  return {{"nodes", nodes}, {"links", links}};
}

nlohmann::json qos_to_json(const shaping::Qos& q) {
  nlohmann::json classes = nlohmann::json::array();
  for (size_t i = 0; i < q.classes.size(); ++i) {
    const auto& c = q.classes[i];
    classes.push_back({{"name", c.name},
                       {"share", c.share},
                       {"ceiling", c.ceiling},
                       {"priority", c.priority},
                       {"dscp", c.dscp},
                       {"default", i == q.default_class}});
  }
  return classes;
}

nlohmann::json to_json(const shaping::Congestion& c) {
  if (c.empty()) return nlohmann::json::object();
  nlohmann::json j = {{"model", c.model},
                      {"xoff", c.xoff},
                      {"xon", c.xon},
                      {"limit", c.limit},
                      {"feeders", c.feeders}};
  if (c.model == "ecn") {
    j["kmin"] = c.kmin;
    j["kmax"] = c.kmax;
    j["pmax"] = c.pmax;
    j["mark_slot"] = c.mark_slot;
    if (c.red) j["red"] = true;
  }
  return j;
}

shaping::Congestion shape_congestion_from_json(const nlohmann::json& j) {
  if (!j.contains("model")) return {};
  shaping::Congestion c{j.at("model"), j.at("xoff"), j.at("xon"), j.at("limit"), j.at("feeders")};
  c.kmin = j.value("kmin", uint64_t{0});
  c.kmax = j.value("kmax", uint64_t{0});
  c.pmax = j.value("pmax", 0.0);
  c.mark_slot = j.value("mark_slot", -1);
  c.red = j.value("red", false);
  return c;
}

namespace {
// "155K", "2.1M", "980B": decimal and short, for plan lines.
std::string short_bytes(uint64_t b) {
  if (b >= 1'000'000) return fmt::format("{:.3g}M", static_cast<double>(b) / 1e6);
  if (b >= 1'000) return fmt::format("{:.3g}K", static_cast<double>(b) / 1e3);
  return std::to_string(b) + "B";
}
}  // namespace

std::string congestion_text(const shaping::Congestion& c) {
  if (c.empty()) return "";
  if (c.model == "ecn" && c.red)
    return fmt::format("congestion ecn kmin {} kmax {} pmax {:g}% limit {} (RED marks)",
                       short_bytes(c.kmin), short_bytes(c.kmax), c.pmax * 100,
                       short_bytes(c.limit));
  if (c.model == "ecn")
    return fmt::format("congestion ecn kmin {} kmax {} pmax {:g}% limit {} (mark slot {})",
                       short_bytes(c.kmin), short_bytes(c.kmax), c.pmax * 100, short_bytes(c.limit),
                       c.mark_slot);
  if (c.feeders == 0)
    return "congestion " + c.model + " limit " + short_bytes(c.limit) + " (host queue)";
  return fmt::format("congestion {} xoff {} xon {} limit {} ({} feeder{})", c.model,
                     short_bytes(c.xoff), short_bytes(c.xon), short_bytes(c.limit), c.feeders,
                     c.feeders == 1 ? "" : "s");
}

shaping::Qos qos_from_json(const nlohmann::json& j) {
  shaping::Qos q;
  for (const auto& c : j) {
    if (c.value("default", false)) q.default_class = q.classes.size();
    q.classes.push_back({c.at("name"), c.at("share"), c.at("ceiling"), c.at("priority"),
                         c.at("dscp").get<std::vector<int>>()});
  }
  return q;
}

Topology topology_from_json(const nlohmann::json& j) {
  Topology t;
  for (const auto& n : j.at("nodes")) {
    Node node{n.at("name"),
              n.at("netns"),
              enum_from(n.at("kind").get<std::string>(), NodeKind::kTransitRouter),
              n.at("region"),
              n.at("server"),
              n.at("index"),
              {}};
    for (const auto& [role, p] : n.at("addrs").items())
      if (auto pr = parse_prefix(p.get<std::string>())) node.addrs.emplace_back(role, *pr);
    node.host = n.value("host", "");
    t.nodes.push_back(std::move(node));
  }
  for (const auto& l : j.at("links")) {
    Link link;
    link.a = end_from(l.at("a"));
    link.b = end_from(l.at("b"));
    link.tier = enum_from(l.at("tier").get<std::string>(), Tier::kWan);
    link.profile = l.at("profile");
    link.wan = l.value("wan", "");
    link.role = l.value("role", "");
    const auto& r = l.at("real");
    link.real = {Rate{r.at("rate_bps")}, Duration{r.at("delay_ns")}, Duration{r.at("jitter_ns")},
                 r.at("loss_pct"), r.at("mtu")};
    const auto& e = l.at("emulated");
    link.emulated = {Rate{e.at("rate_bps")},
                     Duration{e.at("delay_ns")},
                     Duration{e.at("jitter_ns")},
                     e.at("loss_pct"),
                     e.at("mtu"),
                     e.at("notes").get<std::vector<std::string>>(),
                     e.value("jitter_mode", "ordered") == "reorder"};
    if (e.contains("qos")) link.emulated.qos = qos_from_json(e.at("qos"));
    if (e.contains("congestion")) {
      const auto& c = e.at("congestion");
      link.emulated.congestion = {c.at("model"),
                                  c.at("xoff"),
                                  c.at("xon"),
                                  c.at("headroom"),
                                  c.at("buffer"),
                                  c.value("kmin", uint64_t{0}),
                                  c.value("kmax", uint64_t{0}),
                                  c.value("pmax", 0.0),
                                  shape_congestion_from_json(c.at("ab")),
                                  shape_congestion_from_json(c.at("ba"))};
    }
    link.vni = l.value("vni", 0u);
    t.links.push_back(std::move(link));
  }
  return t;
}

}  // namespace tb::plan
