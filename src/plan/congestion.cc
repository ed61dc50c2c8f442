#include "plan/congestion.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/shm_names.h"
#include "plan/plan.h"
#include "shaping/backend.h"
#include "shaping/sizing.h"

namespace tb::plan {
namespace {

// One direction of a link: the egress of `src` toward `dst`.
struct Egress {
  Link* link = nullptr;
  int dir = 0;  // 0: a -> b, 1: b -> a
  const LinkEnd& src() const { return dir == 0 ? link->a : link->b; }
  const LinkEnd& dst() const { return dir == 0 ? link->b : link->a; }
  shaping::Congestion& figures() const {
    return dir == 0 ? link->emulated.congestion.ab : link->emulated.congestion.ba;
  }
};

bool is_switch(NodeKind k) {
  return k == NodeKind::kTor || k == NodeKind::kSpine || k == NodeKind::kVpc;
}

// The emulated rate a direction is shaped to; 0 when it runs at host speed.
Rate shaped_rate(const Link& l) {
  return l.emulated.rate > kHostVethRate ? Rate{0} : l.emulated.rate;
}

// The shape add_shaping gives a direction, before its congestion figures.
shaping::LinkShape plain_shape(const Link& l) {
  shaping::LinkShape s = shape_of(l.emulated);
  s.rate = shaped_rate(l);
  return s;
}

// Bytes sent at `r` in `ns` nanoseconds, rounded up (whole numbers: the floors are exact).
uint64_t bytes_over(Rate r, int64_t ns) {
  const unsigned __int128 b = static_cast<unsigned __int128>(shaping::bytes_per_second(r)) *
                              static_cast<uint64_t>(std::max<int64_t>(ns, 0));
  return static_cast<uint64_t>((b + 999'999'999) / 1'000'000'000);
}

// Every direction of every link, by the node it is sent toward.
using Arrivals = std::map<std::string, std::vector<Egress>>;
Arrivals arrivals_of(std::vector<Link>& links) {
  Arrivals out;
  for (auto& m : links)
    for (int dir = 0; dir < 2; ++dir) {
      Egress in{&m, dir};
      out[in.dst().node].push_back(in);
    }
  return out;
}

// The egresses that feed `e` (design section 3.4): every other link of its switch, sent toward
// the switch, except that a ToR never forwards from one spine to another.
std::vector<Egress> feeders_of(const Egress& e, const Arrivals& in, const Topology& topo) {
  std::vector<Egress> out;
  const Node* sw = topo.node(e.src().node);
  auto it = in.find(sw->name);
  if (it == in.end()) return out;
  for (const Egress& f : it->second) {
    if (f.link == e.link) continue;
    if (sw->kind == NodeKind::kTor && e.link->tier == Tier::kAggregation &&
        f.link->tier == Tier::kAggregation)
      continue;
    out.push_back(f);
  }
  return out;
}

std::string f_model(const Egress& e) {
  return e.figures().model;
}

std::string size_words(uint64_t b) {
  if (b >= 1'000'000) return fmt::format("{:.3g} MB", static_cast<double>(b) / 1e6);
  if (b >= 1'000) return fmt::format("{:.3g} KB", static_cast<double>(b) / 1e3);
  return std::to_string(b) + " B";
}

void note_once(Link& l, std::string note) {
  if (std::ranges::find(l.emulated.notes, note) == l.emulated.notes.end())
    l.emulated.notes.push_back(std::move(note));
}

// "FILE:LINE:COL: [profiles.NAME] link A <-> B: " for a lossless profile's refusal.
std::string congestion_where(const scenario::Scenario& s, const Link& l) {
  std::string at;
  auto p = s.profiles.find(l.profile);
  if (p != s.profiles.end() && p->second.congestion.loc.line > 0)
    at = s.file + ":" + std::to_string(p->second.congestion.loc.line) + ":" +
         std::to_string(p->second.congestion.loc.col) + ": ";
  else if (!s.file.empty())
    at = s.file + ": ";
  return at + "[profiles." + l.profile + "] link " + l.a.node + ":" + l.a.ifname + " <-> " +
         l.b.node + ":" + l.b.ifname + ": ";
}

// Why link `l` cannot have congestion model `model` ("lossless" or "ecn"), or nullopt.
std::optional<std::string> not_emulable(const Link& l, const std::string& model) {
  const std::string key = "congestion = \"" + model + "\"";
  if (l.tier == Tier::kScaleUp || l.tier == Tier::kWan)
    return key +
           " is for links with a switch port the congestion agent polls (rail, spine_link, "
           "frontend); a " +
           to_string(l.tier) + " link has none";
  if (shaped_rate(l).bps == 0)
    return key + " needs a rate limit on both directions; this link runs at host speed, so no " +
           "queue builds where the agent could " + (model == "ecn" ? "read it" : "pause it");
  if (l.vni != 0)
    return key + (model == "ecn" ? " does not cross hosts: the mark table the agent writes is "
                                   "its host's, and the marking stage sits across the tunnel"
                                 : " does not cross hosts: no pause crosses a VXLAN tunnel");
  return std::nullopt;
}

}  // namespace

std::string mark_table_path(const std::string& lab) {
  return shm_lab_prefix(lab) + "congestion";
}

Status congestion_plan(Plan& p, const scenario::Scenario& s) {
  const scenario::Congestion& c = s.congestion;
  const int64_t P = c.poll.ns, L = c.late_budget.ns, A = kAgentNetlink.ns, idle = c.idle_poll.ns;
  // Which links are lossless, or the refusal of one that cannot be.
  for (auto& l : p.topo.links) {
    auto& ec = l.emulated.congestion;
    ec.ab = {};
    ec.ba = {};
    if (ec.model != "lossless" && ec.model != "ecn") continue;
    if (auto why = not_emulable(l, ec.model)) {
      auto prof = s.profiles.find(l.profile);
      if (prof != s.profiles.end() && prof->second.congestion.written)
        return bad_input(congestion_where(s, l) + *why + "; write congestion = \"droptail\"");
      note_once(l, ec.model + " (the " + l.profile + " profile's default) not emulated: " + *why +
                       "; droptail");
      ec.model = "droptail";
    }
  }
  // ECN: each switch egress of an ecn link marks (design section 4); its figures floored and its
  // slot in its host's mark table numbered in link order.
  std::map<std::string, int> slots;  // host -> next free mark slot
  for (auto& l : p.topo.links) {
    if (l.emulated.congestion.model != "ecn") continue;
    for (int dir = 0; dir < 2; ++dir) {
      Egress e{&l, dir};
      const Node* n = p.topo.node(e.src().node);
      if (!is_switch(n->kind)) continue;
      if (e.dst().bridged) {
        note_once(l, "ecn: " + e.src().node + ":" + e.src().ifname + " -> " + e.dst().node +
                         " is not marked: the marking stage sits at the receiving port's "
                         "PREROUTING, which a bridge port has not; it tail-drops");
        continue;
      }
      const auto& ec = l.emulated.congestion;
      const uint64_t F = shaping::frame_bytes(l.emulated.mtu);
      const uint64_t limit = shaping::limit_bytes(plain_shape(l));
      const uint64_t kmin_floor = 2 * F;
      uint64_t kmin = std::max(ec.kmin, kmin_floor);
      uint64_t kmax = std::max(ec.kmax, kmin + 2 * F);
      const std::string scale = fmt::format("{:g}", s.scale.bandwidth);
      if (ec.kmin > 0 && kmin > ec.kmin)
        note_once(l, fmt::format("kmin {} (scaled from the profile) is below two frames at scale "
                                 "{}; kmin {}",
                                 size_words(ec.kmin), scale, size_words(kmin)));
      if (kmax > limit / 2 && limit / 2 > kmin) {
        note_once(l, fmt::format("kmax {} is above half the port's queue ({}); kmax {}",
                                 size_words(kmax), size_words(limit), size_words(limit / 2)));
        kmax = limit / 2;
      } else if (ec.kmax > 0 && kmax > ec.kmax) {
        note_once(l, fmt::format("kmax {} (scaled from the profile) is below kmin + two frames "
                                 "at scale {}; kmax {}",
                                 size_words(ec.kmax), scale, size_words(kmax)));
      }
      shaping::Congestion& out = e.figures();
      out.model = "ecn";
      out.kmin = kmin;
      out.kmax = kmax;
      out.pmax = ec.pmax > 0 ? ec.pmax : kDefaultPmax;
      out.limit = limit;
      out.mark_slot = slots[n->host]++;
    }
  }
  // Each polled egress's floors and limit; each paused host queue's limit.
  const Arrivals in = arrivals_of(p.topo.links);
  for (auto& l : p.topo.links) {
    if (l.emulated.congestion.model != "lossless") continue;
    for (int dir = 0; dir < 2; ++dir) {
      Egress e{&l, dir};
      const Node* n = p.topo.node(e.src().node);
      shaping::Congestion& out = e.figures();
      if (!is_switch(n->kind)) {
        if (n->kind == NodeKind::kGpu || n->kind == NodeKind::kServer) {
          out.model = "lossless";
          out.limit = std::max<uint64_t>(shaping::limit_bytes(plain_shape(l)), kHostQueueLimit);
        }
        continue;
      }
      const Rate R = shaped_rate(l);
      const uint64_t F = shaping::frame_bytes(l.emulated.mtu);
      int64_t D = 0;
      uint64_t bursts = 0, headroom = 0;
      int n_feeders = 0;
      for (const Egress& f : feeders_of(e, in, p.topo)) {
        const Rate Ri = shaped_rate(*f.link);
        if (Ri.bps == 0) continue;  // host speed: nothing the agent can pause
        if (const Node* un = p.topo.node(f.src().node); un->host != n->host) {
          note_once(*f.link, "the congestion agent of host " + n->host + " cannot pause " +
                                 f.src().node + ":" + f.src().ifname + " on host " + un->host +
                                 ": pauses stop at the hosts' seam");
          continue;
        }
        ++n_feeders;
        const int64_t Di =
            f.link->emulated.delay.ns + shaping::kJitterSpan * f.link->emulated.jitter.ns;
        D = std::max(D, Di);
        bursts += shaping::burst_bytes(plain_shape(*f.link));
        headroom +=
            std::max(l.emulated.congestion.headroom,
                     bytes_over(Ri, P + L + A + Di) + shaping::frame_bytes(f.link->emulated.mtu));
      }
      if (n_feeders == 0) continue;  // nothing but the switch itself sends there
      const auto& ec = l.emulated.congestion;
      const uint64_t xon_floor = bytes_over(R, P + A + D);
      const uint64_t xon = std::max(ec.xon, xon_floor);
      const uint64_t band = std::max({2 * F, bytes_over(R, 2 * P), bursts});
      const uint64_t xoff_floor = xon + band;
      const uint64_t xoff = std::max(ec.xoff, xoff_floor);
      const uint64_t onset = n_feeders > 1 ? (n_feeders - 1) * bytes_over(R, idle) : 0;
      out.model = "lossless";
      out.xon = xon;
      out.xoff = xoff;
      out.feeders = n_feeders;
      out.limit = std::max(ec.buffer, xoff + headroom + onset);
      const std::string scale = fmt::format("{:g}", s.scale.bandwidth);
      // A threshold the profile gave (a preset's or its own) that a floor raised.
      if (ec.xoff > 0 && xoff > ec.xoff)
        note_once(l, fmt::format("xoff {} (scaled from the profile) is below the {} a {} "
                                 "congestion agent poll and {} feeders' resume bursts need at "
                                 "scale {}; xoff {}",
                                 size_words(ec.xoff), size_words(xoff_floor),
                                 format_duration(c.poll), n_feeders, scale, size_words(xoff)));
      if (ec.xon > 0 && xon > ec.xon)
        note_once(l,
                  fmt::format("xon {} (scaled from the profile) is below the {} that keeps the "
                              "port busy while resumed traffic arrives at scale {}; xon {}",
                              size_words(ec.xon), size_words(xon_floor), scale, size_words(xon)));
    }
  }
  return {};
}

std::vector<CongestionAgent> congestion_agents(Plan& p, const scenario::Scenario& s) {
  // The TBF add_shaping put on each shaped interface: (netns, ifname) -> its node.
  std::map<std::pair<std::string, std::string>, shaping::TcNode> tbf;
  for (const auto& op : p.ops) {
    const auto* sh = std::get_if<SetShape>(&op);
    if (!sh) continue;
    auto qp = shaping::plan_qdiscs(sh->shape, sh->backend);
    if (!qp) continue;
    for (const auto& node : qp->nodes)
      if (std::holds_alternative<netlink::TbfOptions>(node.options)) {
        tbf.emplace(std::pair{sh->netns, sh->ifname}, node);
        break;
      }
  }
  const scenario::Congestion& c = s.congestion;
  // Agents by host, in [[host]] order ("" for a lab on one host).
  std::vector<std::string> hosts;
  for (const auto& h : p.hosts) hosts.push_back(h.name);
  if (hosts.empty()) hosts.push_back("");
  std::vector<CongestionAgent> agents;
  for (const auto& host : hosts) {
    CongestionAgent a;
    a.poll_ns = c.poll.ns;
    a.idle_poll_ns = c.idle_poll.ns;
    a.late_ns = c.late_budget.ns;
    a.watchdog_ns = c.watchdog.ns;
    a.restore_ns = c.watchdog_restore.ns;
    a.action = c.watchdog_action;
    // The polled egresses on this host, in link order; their index by (netns, ifname).
    std::map<std::pair<std::string, std::string>, int> port_of;
    std::vector<Egress> polled;
    for (auto& l : p.topo.links)
      for (int dir = 0; dir < 2; ++dir) {
        Egress e{&l, dir};
        if (e.figures().feeders == 0 && e.figures().model != "ecn") continue;
        const Node* n = p.topo.node(e.src().node);
        if (n->host != host) continue;
        auto t = tbf.find({n->netns, e.src().ifname});
        if (t == tbf.end()) {
          note_once(l, f_model(e) + " not enforced: shaping backend " +
                           (p.shaping.empty() ? std::string("none") : p.shaping) +
                           " puts no TBF on the switch port for the congestion agent to read "
                           "and pause (use tbf or netem): its queue drops at its limit");
          continue;
        }
        const shaping::Congestion& f = e.figures();
        port_of[{n->netns, e.src().ifname}] = static_cast<int>(a.ports.size());
        a.ports.push_back({e.src().node + ":" + e.src().ifname,
                           n->netns,
                           e.src().ifname,
                           t->second.handle,
                           t->second.parent,
                           f.model,
                           f.xoff,
                           f.xon,
                           f.kmin,
                           f.kmax,
                           f.pmax,
                           {}});
        a.ports.back().mark_slot = f.mark_slot;
        a.ports.back().red = f.red;
        if (const auto* o = std::get_if<netlink::TbfOptions>(&t->second.options)) {
          a.ports.back().rate = o->rate;
          a.ports.back().burst = o->burst;
          a.ports.back().limit = o->limit;
        }
        a.ports.back().mtu = static_cast<uint32_t>(l.emulated.mtu);
        polled.push_back(e);
      }
    if (a.ports.empty()) continue;
    // Their feeders: this agent's upstreams, each once (indices into this agent's list only).
    std::map<std::pair<std::string, std::string>, int> upstream_of;
    const Arrivals in = arrivals_of(p.topo.links);
    for (size_t i = 0; i < polled.size(); ++i) {
      const Egress& e = polled[i];
      if (e.figures().model != "lossless") continue;  // an ecn port marks; it pauses nothing
      for (const Egress& f : feeders_of(e, in, p.topo)) {
        const Node* un = p.topo.node(f.src().node);
        const std::pair key{un->netns, f.src().ifname};
        auto t = tbf.find(key);
        if (t == tbf.end()) continue;    // host speed: nothing to pause (no feeder in the figures)
        if (un->host != host) continue;  // congestion_plan's note: not a feeder
        auto [it, fresh] = upstream_of.try_emplace(key, static_cast<int>(a.upstreams.size()));
        if (fresh) {
          const auto& o = std::get<netlink::TbfOptions>(t->second.options);
          const Rate r = shaped_rate(*f.link);
          auto port = port_of.find(key);
          a.upstreams.push_back(
              {f.src().node + ":" + f.src().ifname, un->netns, f.src().ifname, t->second.handle,
               t->second.parent, o.rate, o.burst, o.limit,
               static_cast<uint32_t>(f.link->emulated.mtu),
               // 802.1Qbb: a pause lasts at most 65535 quanta of 512 bit times at the port's rate.
               static_cast<int64_t>(std::llround(65535.0 * 512.0 * 1e9 / r.bps)), f.dst().ifname,
               port == port_of.end() ? -1 : port->second});
        }
        a.ports[i].feeders.push_back(it->second);
      }
    }
    a.netns = a.ports.front().netns;
    if (std::ranges::any_of(a.ports, [](const CongestionPort& cp) { return cp.mark_slot >= 0; }))
      a.mark_table = mark_table_path(p.lab);
    agents.push_back(std::move(a));
  }
  return agents;
}

namespace {

// The regions with a marking (ecn) switch port.
std::set<std::string> ecn_regions(const Plan& p) {
  std::set<std::string> out;
  for (const auto& l : p.topo.links)
    if (l.emulated.congestion.ab.model == "ecn" || l.emulated.congestion.ba.model == "ecn")
      for (const LinkEnd* end : {&l.a, &l.b}) out.insert(p.topo.node(end->node)->region);
  return out;
}

}  // namespace

void set_ecn_congctl(const Plan& p, std::vector<Op>& addrs, std::vector<Op>& routes,
                     const std::string& congctl) {
  const auto regions = ecn_regions(p);
  if (regions.empty()) return;
  std::set<std::string> netns;
  for (const auto& n : p.topo.nodes)
    if ((n.kind == NodeKind::kGpu || n.kind == NodeKind::kServer) && regions.contains(n.region))
      netns.insert(n.netns);
  for (auto& op : routes)
    if (auto* r = std::get_if<AddRoute>(&op); r && r->dst.len == 0 && netns.contains(r->netns))
      r->congctl = congctl;
  // Their VPC ports (the GPU and server ends of frontend links): the kernel's connected route
  // for the subnet would carry no congctl, and server to server the VPC is that subnet.
  std::set<std::pair<std::string, std::string>> vpc_ports;
  for (const auto& l : p.topo.links)
    if (l.tier == Tier::kFrontend)
      for (const LinkEnd* end : {&l.a, &l.b})
        if (const Node* n = p.topo.node(end->node); n && netns.contains(n->netns))
          vpc_ports.insert({n->netns, end->ifname});
  for (auto& op : addrs) {
    auto* a = std::get_if<AddAddr>(&op);
    if (!a || !vpc_ports.contains({a->netns, a->ifname})) continue;
    a->noprefixroute = true;
    // The route the kernel would have made (net/ipv4/fib_frontend.c fib_add_ifaddr: the subnet
    // through the port, scope link, the address as source, metric 0), with the congctl; before
    // the namespace's first route, as the kernel's came with the address.
    AddRoute subnet{a->netns, a->addr.network(), {{a->ifname, std::nullopt}}, a->addr.addr};
    subnet.congctl = congctl;
    auto first = std::ranges::find_if(routes, [&](const Op& o) {
      const auto* r = std::get_if<AddRoute>(&o);
      return r && r->netns == a->netns;
    });
    routes.insert(first, std::move(subnet));
  }
}

std::vector<SetSysctl> congestion_sysctls(const Plan& p) {
  std::vector<SetSysctl> out;
  // ECN negotiated by every GPU and server of a region with a marking (ecn) tier.
  const auto regions = ecn_regions(p);
  std::set<std::string> ecn_seen;
  for (const auto& n : p.topo.nodes)
    if ((n.kind == NodeKind::kGpu || n.kind == NodeKind::kServer) && regions.contains(n.region) &&
        ecn_seen.insert(n.netns).second)
      out.push_back(SetSysctl{n.netns, "net/ipv4/tcp_ecn", "1"});
  std::set<std::string> seen;
  for (const auto& l : p.topo.links) {
    if (l.tier != Tier::kScaleOut || l.emulated.congestion.model != "lossless") continue;
    for (const LinkEnd* end : {&l.a, &l.b}) {
      const Node* n = p.topo.node(end->node);
      if (n->kind == NodeKind::kGpu && seen.insert(n->netns).second)
        out.push_back(SetSysctl{n->netns, "net/ipv4/tcp_slow_start_after_idle", "0"});
    }
  }
  return out;
}

}  // namespace tb::plan
