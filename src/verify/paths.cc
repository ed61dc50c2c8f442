#include "verify/paths.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "netlink/dump.h"
#include "netlink/netns.h"
#include "netlink/socket.h"
#include "plan/hosts.h"

namespace tb::verify {
namespace {

using plan::Link;
using plan::LinkEnd;
using plan::Node;
using plan::NodeKind;
using plan::Topology;

bool holds(const Topology& t, const Node& n, Ipv4 a) {
  for (const auto& [role, p] : n.addrs)
    if (p.addr == a) return true;
  for (const auto& l : t.links)
    for (const LinkEnd* e : {&l.a, &l.b})
      if (e->node == n.name && e->addr && e->addr->addr == a) return true;
  return false;
}

// The link whose end is `node`:`ifname`, and whether that end is `a`.
std::optional<std::pair<size_t, bool>> link_at(const Topology& t, const std::string& node,
                                               const std::string& ifname) {
  for (size_t i = 0; i < t.links.size(); ++i) {
    const auto& l = t.links[i];
    if (l.a.node == node && l.a.ifname == ifname) return std::pair{i, true};
    if (l.b.node == node && l.b.ifname == ifname) return std::pair{i, false};
  }
  return std::nullopt;
}

// A bridge in `node` forwards a frame for `l3` out of the port whose far end holds `l3`: the
// far end's own address first, else any address of the far node.
std::optional<std::pair<size_t, bool>> bridge_port_toward(const Topology& t,
                                                          const std::string& node, Ipv4 l3,
                                                          std::optional<size_t> arrived_on) {
  std::optional<std::pair<size_t, bool>> node_match;
  for (size_t i = 0; i < t.links.size(); ++i) {
    if (arrived_on && *arrived_on == i) continue;
    const auto& l = t.links[i];
    for (bool a_side : {true, false}) {
      const LinkEnd& mine = a_side ? l.a : l.b;
      const LinkEnd& far = a_side ? l.b : l.a;
      if (mine.node != node || !mine.bridged) continue;
      if (far.addr && far.addr->addr == l3) return std::pair{i, a_side};
      const Node* fn = t.node(far.node);
      if (!node_match && fn && holds(t, *fn, l3)) node_match = std::pair{i, a_side};
    }
  }
  return node_match;
}

PathHop hop_of(const Topology& t, size_t i, bool from_a, const FiguresOf& figures) {
  const Link& l = t.links[i];
  const LinkEnd& from = from_a ? l.a : l.b;
  const LinkEnd& to = from_a ? l.b : l.a;
  const auto f = figures(i);
  return PathHop{i,         from.node, from.ifname, to.node,
                 to.ifname, f.delay,   f.jitter,    delay_tolerance(f.delay)};
}

std::string ms3(Duration d) {
  return fmt::format("{:.3f}ms", d.ms());
}

// The GPU's rail: the index of the ToR its scale-out port is on (-1 when it has none).
int rail_of(const Topology& t, const Node& gpu) {
  for (const auto& l : t.links) {
    if (l.tier != plan::Tier::kScaleOut) continue;
    const std::string* other = l.a.node == gpu.name   ? &l.b.node
                               : l.b.node == gpu.name ? &l.a.node
                                                      : nullptr;
    if (!other) continue;
    if (const Node* n = t.node(*other); n && n->kind == NodeKind::kTor) return n->index;
  }
  return -1;
}

}  // namespace

Duration Path::delay() const {
  Duration d;
  for (const auto& h : hops) d.ns += h.delay.ns;
  return d;
}

Duration Path::tolerance() const {
  Duration d;
  for (const auto& h : hops) d.ns += h.tolerance.ns;
  return d;
}

Duration Path::jitter_sigma() const {
  double var = 0;
  for (const auto& h : hops) var += static_cast<double>(h.jitter.ns) * h.jitter.ns;
  return Duration{static_cast<int64_t>(std::sqrt(var))};
}

std::string Path::text() const {
  std::string s;
  for (const auto& h : hops) {
    if (!s.empty()) s += " | ";
    s += h.from + ":" + h.from_if + " -> " + h.to + ":" + h.to_if + " (" +
         (h.delay.ns ? format_duration(h.delay) : "0") + ")";
  }
  return s.empty() ? "(no hop: the same node)" : s;
}

std::vector<PathPair> path_pairs(const Topology& t) {
  const auto adj = plan::wan_adjacency(t);
  std::vector<PathPair> out;
  std::map<int, int> rails;  // cached rail per node index
  auto rail = [&](size_t i) {
    auto it = rails.find(static_cast<int>(i));
    if (it != rails.end()) return it->second;
    return rails[static_cast<int>(i)] = rail_of(t, t.nodes[i]);
  };
  struct Rule {
    const char* cls;
    std::function<bool(size_t, size_t)> fits;
  };
  auto kind = [&](size_t i) { return t.nodes[i].kind; };
  auto same_region = [&](size_t i, size_t j) { return t.nodes[i].region == t.nodes[j].region; };
  auto gpus = [&](size_t i, size_t j) {
    return kind(i) == NodeKind::kGpu && kind(j) == NodeKind::kGpu;
  };
  const std::vector<Rule> rules = {
      {"gpu-gpu in a server",
       [&](size_t i, size_t j) {
         return gpus(i, j) && same_region(i, j) && t.nodes[i].server == t.nodes[j].server;
       }},
      {"gpu-gpu same rail",
       [&](size_t i, size_t j) {
         return gpus(i, j) && same_region(i, j) && t.nodes[i].server != t.nodes[j].server &&
                rail(i) >= 0 && rail(i) == rail(j);
       }},
      {"gpu-gpu across rails",
       [&](size_t i, size_t j) {
         return gpus(i, j) && same_region(i, j) && t.nodes[i].server != t.nodes[j].server &&
                rail(i) >= 0 && rail(j) >= 0 && rail(i) != rail(j);
       }},
      {"gpu-gpu across regions",
       [&](size_t i, size_t j) { return gpus(i, j) && !same_region(i, j); }},
      {"server-server over the vpc",
       [&](size_t i, size_t j) {
         return kind(i) == NodeKind::kServer && kind(j) == NodeKind::kServer && same_region(i, j);
       }},
      {"server -> transit router",
       [&](size_t i, size_t j) {
         return kind(i) == NodeKind::kServer && kind(j) == NodeKind::kTransitRouter &&
                same_region(i, j);
       }},
      {"transit router -> server",
       [&](size_t i, size_t j) {
         return kind(i) == NodeKind::kTransitRouter && kind(j) == NodeKind::kServer &&
                same_region(i, j);
       }},
      {"server-server across regions",
       [&](size_t i, size_t j) {
         return kind(i) == NodeKind::kServer && kind(j) == NodeKind::kServer && !same_region(i, j);
       }},
  };
  for (const auto& rule : rules) {
    bool found = false;
    for (size_t i = 0; i < t.nodes.size() && !found; ++i)
      for (size_t j = 0; j < t.nodes.size() && !found; ++j) {
        if (i == j || !rule.fits(i, j)) continue;
        auto r = plan::reach(t.nodes[i], t.nodes[j], adj);
        if (!r) continue;
        out.push_back({rule.cls, t.nodes[i].name, t.nodes[j].name, r->first.addr, r->second});
        found = true;
      }
  }
  return out;
}

std::vector<PathPair> load_pairs(const Topology& t) {
  const auto adj = plan::wan_adjacency(t);
  std::vector<PathPair> out;
  auto add = [&](const char* cls, const Node& a, const Node& b) {
    if (auto r = plan::reach(a, b, adj))
      out.push_back({cls, a.name, b.name, r->first.addr, r->second});
  };
  // GPUs and servers by region, in topology order.
  std::map<std::string, std::vector<const Node*>> gpus, servers;
  for (const auto& n : t.nodes) {
    if (n.kind == NodeKind::kGpu) gpus[n.region].push_back(&n);
    if (n.kind == NodeKind::kServer) servers[n.region].push_back(&n);
  }
  for (const auto& [region, gs] : gpus)
    for (const Node* g : gs) {
      const int r = rail_of(t, *g);
      // The next server's GPU on the same rail (wrapping), then the next GPU in the server.
      const Node* rail_peer = nullptr;
      const Node* nvl_peer = nullptr;
      // On the rail, the same GPU index first (several GPUs of a server can share one rail).
      for (int pass = 0; pass < 2 && !rail_peer; ++pass)
        for (size_t k = 1; k <= gs.size(); ++k) {
          const Node* o = gs[(std::ranges::find(gs, g) - gs.begin() + k) % gs.size()];
          if (o == g) continue;
          if (!rail_peer && o->server != g->server && r >= 0 && rail_of(t, *o) == r &&
              (pass == 1 || o->index == g->index))
            rail_peer = o;
          if (!nvl_peer && o->server == g->server) nvl_peer = o;
        }
      if (rail_peer) add("rail", *g, *rail_peer);
      if (nvl_peer) add("nvlink", *g, *nvl_peer);
    }
  for (const auto& [region, ss] : servers)
    for (size_t k = 0; k < ss.size() && ss.size() > 1; ++k)
      add("vpc", *ss[k], *ss[(k + 1) % ss.size()]);
  return out;
}

Result<Path> walk_path(const Topology& t, const std::string& from, Ipv4 dst,
                       const RouteLookup& lookup, const FiguresOf& figures) {
  const Node* cur = t.node(from);
  if (!cur) return bad_input("the lab has no node \"" + from + "\"");
  Path p;
  const std::string what = "path " + from + " -> " + dst.to_string();
  for (int step = 0; step <= kMaxPathHops; ++step) {
    if (holds(t, *cur, dst)) return p;
    auto r = lookup(*cur, dst);
    if (!r) return std::unexpected(with_context(r.error(), what));
    if (r->hops.empty())
      return fail(what + ": " + cur->name + " has no route to " + dst.to_string());
    const NextHop& nh = r->hops.front();
    const Ipv4 l3 = nh.via.value_or(dst);
    auto out = link_at(t, cur->name, nh.ifname);
    if (!out) out = bridge_port_toward(t, cur->name, l3, std::nullopt);  // a bridge device
    if (!out)
      return fail(what + ": at " + cur->name + " the route leaves by " + nh.ifname +
                  ", which is no link of the lab and no bridge with a port toward " +
                  l3.to_string());
    if (r->hops.size() > 1) {
      std::string names, differ;
      for (const auto& h : r->hops) {
        names += (names.empty() ? "" : ", ") + h.ifname;
        if (auto alt = link_at(t, cur->name, h.ifname);
            alt && figures(alt->first).delay != figures(out->first).delay)
          differ = "; their first hops' delays DIFFER, so the probes' hash decides";
      }
      p.notes.push_back(cur->name + ": " + std::to_string(r->hops.size()) +
                        " equal-cost next hops (" + names + "); the path follows " + nh.ifname +
                        differ);
    }
    p.hops.push_back(hop_of(t, out->first, out->second, figures));
    // Across bridges: a frame that arrives on a bridge port and is not for the bridge's own
    // address is forwarded out of the port toward its next L3 hop.
    for (;;) {
      const Link& l = t.links[out->first];
      const LinkEnd& arrived = out->second ? l.b : l.a;
      const Node* n = t.node(arrived.node);
      if (!n) return fail(what + ": link names unknown node " + arrived.node);
      cur = n;
      if (!arrived.bridged || holds(t, *n, l3)) break;
      if (static_cast<int>(p.hops.size()) >= kMaxPathHops)
        return fail(what + ": more than " + std::to_string(kMaxPathHops) + " hops");
      out = bridge_port_toward(t, n->name, l3, out->first);
      if (!out)
        return fail(what + ": the bridge in " + n->name + " has no port toward " + l3.to_string());
      p.hops.push_back(hop_of(t, out->first, out->second, figures));
    }
  }
  return fail(what + ": more than " + std::to_string(kMaxPathHops) + " hops (a routing loop?)");
}

Result<Ipv4> source_address(const Topology& t, const std::string& from, Ipv4 dst,
                            const RouteLookup& lookup) {
  const Node* n = t.node(from);
  if (!n) return bad_input("the lab has no node \"" + from + "\"");
  auto r = lookup(*n, dst);
  if (!r) return std::unexpected(r.error());
  if (r->prefsrc) return *r->prefsrc;
  if (r->hops.empty()) return fail(from + " has no route to " + dst.to_string());
  const NextHop& nh = r->hops.front();
  const Ipv4 l3 = nh.via.value_or(dst);
  if (auto out = link_at(t, from, nh.ifname)) {
    const Link& l = t.links[out->first];
    const LinkEnd& mine = out->second ? l.a : l.b;
    if (mine.addr) return mine.addr->addr;
  }
  for (const auto& [role, p] : n->addrs)
    if (p.len > 0 && p.network() == Prefix{l3, p.len}.network()) return p.addr;
  for (const auto& [role, p] : n->addrs)
    if (p.len < 32) return p.addr;  // the kernel would pick some address; the first will do
  return fail(from + ": no address to send from toward " + dst.to_string());
}

Result<RouteAnswer> live_route_lookup(const Node& at, Ipv4 dst) {
  auto fd = netlink::open_named_netns(at.netns);
  if (!fd) return std::unexpected(fd.error());
  auto sock = netlink::NlSocket::open_in(fd->get());
  if (!sock) return std::unexpected(sock.error());
  const std::string where = "netns " + at.netns;
  auto m = netlink::lookup_route(*sock, dst, where);
  if (!m) return std::unexpected(m.error());
  auto links = netlink::list_links(*sock, where);
  if (!links) return std::unexpected(links.error());
  RouteAnswer a;
  a.prefsrc = m->prefsrc;
  for (const auto& h : m->hops) {
    auto it = std::ranges::find_if(*links, [&](const auto& l) { return l.ifindex == h.ifindex; });
    if (it == links->end())
      return fail("route get " + dst.to_string() + " in " + where + ": interface index " +
                  std::to_string(h.ifindex) + " is not listed");
    a.hops.push_back({it->name, h.via});
  }
  return a;
}

PathCheck check_path(const Path& out, const Path& back, const std::optional<probe::RttResult>& rtt,
                     const std::optional<probe::RttResult>& base) {
  PathCheck c;
  c.configured_ms = out.delay().ms() + back.delay().ms();
  c.tolerance_ms = out.tolerance().ms() + back.tolerance().ms();
  if (base && base->summary.n > 0) c.base_ms = base->summary.p50 / 1000;
  c.expected_ms = c.configured_ms + c.base_ms;
  if (rtt && rtt->summary.n > 0) c.achieved_ms = rtt->summary.p50 / 1000;
  c.detail = fmt::format(
      "expected = out {} + back {} (delays in force, {} + {} hops) + median base over lo {:.3f} "
      "ms; "
      "tolerance = sum of the hops' ({} out, {} back)",
      ms3(out.delay()), ms3(back.delay()), out.hops.size(), back.hops.size(), c.base_ms,
      ms3(out.tolerance()), ms3(back.tolerance()));
  if (rtt) c.detail += fmt::format("; {} of {} probes answered", rtt->received, rtt->sent);
  const Duration sigma{static_cast<int64_t>(
      std::hypot(static_cast<double>(out.jitter_sigma().ns), back.jitter_sigma().ns))};
  if (sigma.ns > 0)
    c.detail += "; the path has jitter (RTT sigma " + ms3(sigma) + "): the median is judged";
  if (!c.achieved_ms || !base || base->summary.n == 0) {
    c.verdict = Verdict::kFail;
    c.reason = "no RTT measurement (the probe failed, or no probe was answered)";
    return c;
  }
  const double err = *c.achieved_ms - c.expected_ms;
  c.verdict = std::abs(err) <= c.tolerance_ms ? Verdict::kPass : Verdict::kFail;
  if (c.verdict == Verdict::kFail)
    c.reason =
        fmt::format("RTT off by {:+.3f} ms, more than the hops' {:.3f} ms", err, c.tolerance_ms);
  return c;
}

}  // namespace tb::verify
