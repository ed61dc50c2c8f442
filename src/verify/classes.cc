#include "verify/classes.h"

#include <algorithm>
#include <map>

#include "plan/emulate.h"
#include "scenario/names.h"

namespace tb::verify {
namespace {

constexpr uint64_t kMinBuffer = uint64_t{256} << 10;
// Below ~8 Mbit/s (a rate verify does not check: tolerance.h), the floor is what the link
// carries in this long instead, at least kMinSlowBuffer: 256 KiB would queue seconds of data
// that the transfer then waits to drain (4 s at 1 Mbit/s, hz-bj's VPN) and still be tens of
// times its bandwidth-delay product.
constexpr double kSlowFloorS = 0.25;
constexpr uint64_t kMinSlowBuffer = uint64_t{16} << 10;
constexpr uint64_t kMaxBuffer = uint64_t{256} << 20;
constexpr double kQueueAllowanceS = 0.002;

bool same_class(const plan::Link& l, plan::Tier tier, const std::string& profile) {
  return l.tier == tier && l.profile == profile;
}

bool end_matches(const plan::LinkEnd& e, const Endpoint& want) {
  return e.node == want.node && (want.ifname.empty() || e.ifname == want.ifname);
}

}  // namespace

std::string LinkClass::name() const {
  return std::string(to_string(tier)) + "/" + profile;
}

std::string LinkClass::where() const {
  if (host.empty()) return "";
  if (serve_host.empty()) return "on host " + host;
  return host + " -> " + serve_host + " (a VXLAN tunnel)";
}

namespace {

// Sets the class's hosts from its representative's ends.
void set_hosts(const plan::Topology& t, LinkClass& c) {
  const auto& l = t.links.at(c.link);
  const plan::Node* a = t.node(l.a.node);
  const plan::Node* b = t.node(l.b.node);
  c.host = a ? a->host : "";
  const std::string hb = b ? b->host : "";
  c.serve_host = hb != c.host ? hb : "";
}

bool on_one_host(const plan::Topology& t, const plan::Link& l) {
  const plan::Node* a = t.node(l.a.node);
  const plan::Node* b = t.node(l.b.node);
  return a && b && a->host == b->host;
}

}  // namespace

std::vector<LinkClass> link_classes(const plan::Topology& t) {
  std::vector<LinkClass> out;
  std::vector<char> whole;  // per class: the representative has both ends on one host
  for (size_t i = 0; i < t.links.size(); ++i) {
    const auto& l = t.links[i];
    const bool one = on_one_host(t, l);
    auto it = std::ranges::find_if(
        out, [&](const LinkClass& c) { return same_class(l, c.tier, c.profile); });
    if (it == out.end()) {
      out.push_back({l.tier, l.profile, i, 1, {}, {}});
      whole.push_back(one);
      continue;
    }
    ++it->members;
    const size_t k = static_cast<size_t>(it - out.begin());
    if (!whole[k] && one) {  // the first link of the class wholly on one host
      it->link = i;
      whole[k] = 1;
    }
  }
  for (auto& c : out) set_hosts(t, c);
  return out;
}

LinkClass class_of(const plan::Topology& t, size_t i) {
  const auto& l = t.links.at(i);
  LinkClass c{l.tier, l.profile, i, 0, {}, {}};
  for (const auto& o : t.links) c.members += same_class(o, l.tier, l.profile);
  set_hosts(t, c);
  return c;
}

Endpoint parse_endpoint(std::string_view text) {
  Endpoint e;
  const auto colon = text.find(':');
  e.node = scenario::canonical_node(text.substr(0, colon));
  if (colon != std::string_view::npos) e.ifname = std::string(text.substr(colon + 1));
  return e;
}

Result<size_t> find_link(const plan::Topology& t, const Endpoint& x, const Endpoint& y) {
  for (const auto* e : {&x, &y})
    if (!t.node(e->node)) return bad_input("the lab has no node \"" + e->node + "\"");
  std::vector<size_t> hits;
  for (size_t i = 0; i < t.links.size(); ++i) {
    const auto& l = t.links[i];
    if ((end_matches(l.a, x) && end_matches(l.b, y)) ||
        (end_matches(l.a, y) && end_matches(l.b, x)))
      hits.push_back(i);
  }
  if (hits.size() == 1) return hits.front();
  if (hits.empty())
    return bad_input("no link joins " + x.node + (x.ifname.empty() ? "" : ":" + x.ifname) +
                     " and " + y.node + (y.ifname.empty() ? "" : ":" + y.ifname));
  std::string list;
  for (size_t i : hits) {
    const auto& l = t.links[i];
    list += (list.empty() ? "" : ", ") + l.a.node + ":" + l.a.ifname + " " + l.b.node + ":" +
            l.b.ifname;
  }
  return bad_input(std::to_string(hits.size()) + " links join " + x.node + " and " + y.node +
                   "; name the ports: " + list);
}

Result<ProbeTarget> a_side_target(const plan::Topology& t, const plan::Link& l) {
  const plan::Node* a = t.node(l.a.node);
  const plan::Node* b = t.node(l.b.node);
  if (!a || !b) return bad_input("link " + l.a.node + " - " + l.b.node + " names an unknown node");
  if (!l.a.addr)
    return fail("link " + l.a.node + ":" + l.a.ifname + " - " + l.b.node + ":" + l.b.ifname +
                ": A's port has no address to send probes from");
  return ProbeTarget{a->netns, l.a.ifname, l.a.addr->addr, b->netns, {}, {}, {}};
}

Result<ProbeTarget> probe_target(const plan::Topology& t, const plan::Link& l,
                                 const std::vector<apply::IfaceInfo>& b_ifaces) {
  auto target = a_side_target(t, l);
  if (!target) return target;
  ProbeTarget& p = *target;
  const plan::Node* b = t.node(l.b.node);
  if (l.b.addr) {
    p.addr = l.b.addr->addr;
    p.why = "B's address on this link";
  } else {
    // A bridge port: probe B's address on the bridge, the one in A's subnet, so the probes
    // cross exactly this veth and then B's bridge.
    const Prefix mine = *l.a.addr;
    auto it = std::ranges::find_if(b->addrs, [&](const auto& ra) {
      return ra.second.len == mine.len && ra.second.network() == mine.network();
    });
    if (it == b->addrs.end())
      return fail("link " + l.a.node + ":" + l.a.ifname + " - " + l.b.node + ":" + l.b.ifname +
                  ": B's port has no address and none of B's addresses is in " +
                  mine.network().to_string());
    p.addr = it->second.addr;
    p.why = "B's port " + l.b.ifname + " has no address (a bridge port); B's \"" + it->first +
            "\" address on its bridge, in A's subnet " + mine.network().to_string();
  }
  const auto holds = [&](const apply::IfaceInfo& i) {
    return std::ranges::any_of(i.addrs, [&](const Prefix& x) { return x.addr == p.addr; });
  };
  auto port = std::ranges::find_if(b_ifaces, [&](const auto& i) { return i.ifname == l.b.ifname; });
  if (port != b_ifaces.end() && holds(*port)) {
    p.server_dev = port->ifname;
  } else if (auto any = std::ranges::find_if(b_ifaces, holds); any != b_ifaces.end()) {
    p.server_dev = any->ifname;
  } else {
    return fail("no interface in " + b->netns + " holds " + p.addr.to_string() +
                " (is the lab up? see `testbedctl status`)");
  }
  if (p.server_dev != l.b.ifname) p.why += "; the server listens on " + p.server_dev;
  return p;
}

uint64_t tcp_buffer_bytes(Rate rate, Duration delay) {
  const double bps = rate.bps > 0 ? rate.bps : plan::kHostVethRate.bps;
  const double rtt_s = 2 * delay.seconds() + kQueueAllowanceS;
  const double bdp = bps * rtt_s / 8;
  const uint64_t floor =
      std::clamp(static_cast<uint64_t>(bps * kSlowFloorS / 8), kMinSlowBuffer, kMinBuffer);
  return std::clamp(static_cast<uint64_t>(2 * bdp), floor, kMaxBuffer);
}

}  // namespace tb::verify
