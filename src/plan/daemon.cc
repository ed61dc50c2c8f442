#include "plan/daemon.h"

#include <nlohmann/json.hpp>

#include "core/overload.h"

namespace tb::plan {
namespace {

using nlohmann::json;

template <class T, class F>
T parsed(const json& j, F parse) {
  auto v = parse(j.get<std::string>());
  if (!v) throw json::other_error::create(501, v.error().message, &j);
  return *v;
}
Ipv4 ip_from(const json& j) {
  return parsed<Ipv4>(j, [](const std::string& s) { return parse_ipv4(s); });
}
Prefix prefix_from(const json& j) {
  return parsed<Prefix>(j, [](const std::string& s) { return parse_prefix(s); });
}

json agent_json(const Agent& a) {
  json paths = json::array();
  for (const auto& p : a.paths) {
    json dsts = json::array();
    for (const auto& d : p.dsts) dsts.push_back(d.to_string());
    paths.push_back({{"name", p.name},
                     {"dev", p.dev},
                     {"peer", p.peer.to_string()},
                     {"dsts", dsts},
                     {"metric", p.metric}});
  }
  return {{"netns", a.netns},   {"node", a.node}, {"port", a.port}, {"interval_ns", a.interval_ns},
          {"misses", a.misses}, {"paths", paths}};
}
Agent agent_from(const json& j) {
  Agent a{j.at("netns"), j.at("node"), j.at("port"), j.at("interval_ns"), j.at("misses"), {}};
  for (const auto& p : j.at("paths")) {
    AgentPath ap{p.at("name"), p.at("dev"), ip_from(p.at("peer")), {}, p.at("metric")};
    for (const auto& d : p.at("dsts")) ap.dsts.push_back(prefix_from(d));
    a.paths.push_back(std::move(ap));
  }
  return a;
}

json router_json(const Router& r) {
  json nets = json::array(), nbrs = json::array();
  for (const auto& n : r.networks) nets.push_back(n.to_string());
  for (const auto& n : r.neighbors)
    nbrs.push_back({{"wan", n.wan},
                    {"addr", n.addr.to_string()},
                    {"asn", n.asn},
                    {"local_pref", n.local_pref}});
  return {{"netns", r.netns},
          {"node", r.node},
          {"asn", r.asn},
          {"router_id", r.router_id.to_string()},
          {"networks", nets},
          {"neighbors", nbrs},
          {"bfd_interval_ms", r.bfd_interval_ms},
          {"bfd_multiplier", r.bfd_multiplier}};
}
Router router_from(const json& j) {
  Router r{j.at("netns"),
           j.at("node"),
           j.at("asn"),
           ip_from(j.at("router_id")),
           {},
           {},
           j.at("bfd_interval_ms"),
           j.at("bfd_multiplier")};
  for (const auto& n : j.at("networks")) r.networks.push_back(prefix_from(n));
  for (const auto& n : j.at("neighbors"))
    r.neighbors.push_back({n.at("wan"), ip_from(n.at("addr")), n.at("asn"), n.at("local_pref")});
  return r;
}

json fabric_json(const FabricAgent& f) {
  json tors = json::array(), gpus = json::array();
  for (const auto& t : f.tors)
    tors.push_back({{"node", t.node},
                    {"netns", t.netns},
                    {"spine_port", t.spine_port},
                    {"addr", t.addr.to_string()}});
  for (const auto& g : f.gpus) {
    json ports = json::array();
    for (const auto& p : g.ports) ports.push_back({{"tor", p.tor}, {"port", p.port}});
    gpus.push_back({{"node", g.node}, {"addr", g.addr.to_string()}, {"ports", ports}});
  }
  return {{"region", f.region},           {"netns", f.netns}, {"spine_nodes", f.spine_nodes},
          {"spine_netns", f.spine_netns}, {"tors", tors},     {"gpus", gpus}};
}
FabricAgent fabric_from(const json& j) {
  FabricAgent f{j.at("region"), j.at("netns"), j.at("spine_nodes"), j.at("spine_netns"), {}, {}};
  for (const auto& t : j.at("tors"))
    f.tors.push_back({t.at("node"), t.at("netns"), t.at("spine_port"), ip_from(t.at("addr"))});
  for (const auto& g : j.at("gpus")) {
    FabricGpu gpu{g.at("node"), ip_from(g.at("addr")), {}};
    for (const auto& p : g.at("ports")) gpu.ports.push_back({p.at("tor"), p.at("port")});
    f.gpus.push_back(std::move(gpu));
  }
  return f;
}

}  // namespace

json to_json(const CongestionAgent& c) {
  json ports = json::array(), ups = json::array();
  for (const auto& p : c.ports)
    ports.push_back({{"name", p.name},
                     {"netns", p.netns},
                     {"ifname", p.ifname},
                     {"handle", p.handle},
                     {"parent", p.parent},
                     {"model", p.model},
                     {"xoff", p.xoff},
                     {"xon", p.xon},
                     {"kmin", p.kmin},
                     {"kmax", p.kmax},
                     {"pmax", p.pmax},
                     {"feeders", p.feeders},
                     {"rate", p.rate},
                     {"burst", p.burst},
                     {"limit", p.limit},
                     {"mtu", p.mtu}});
  for (size_t i = 0; i < c.ports.size(); ++i) {
    if (c.ports[i].mark_slot >= 0) ports[i]["mark_slot"] = c.ports[i].mark_slot;
    if (c.ports[i].red) ports[i]["red"] = true;
  }
  for (const auto& u : c.upstreams)
    ups.push_back({{"name", u.name},
                   {"netns", u.netns},
                   {"ifname", u.ifname},
                   {"handle", u.handle},
                   {"parent", u.parent},
                   {"rate", u.rate},
                   {"burst", u.burst},
                   {"limit", u.limit},
                   {"mtu", u.mtu},
                   {"quantum_ns", u.quantum_ns},
                   {"feeds_ifname", u.feeds_ifname},
                   {"port", u.port}});
  json out = {{"netns", c.netns},
              {"poll_ns", c.poll_ns},
              {"idle_poll_ns", c.idle_poll_ns},
              {"late_ns", c.late_ns},
              {"watchdog_ns", c.watchdog_ns},
              {"restore_ns", c.restore_ns},
              {"action", c.action},
              {"ports", ports},
              {"upstreams", ups}};
  if (!c.mark_table.empty()) out["mark_table"] = c.mark_table;
  return out;
}

CongestionAgent congestion_from_json(const json& j) {
  CongestionAgent c{j.at("netns"),
                    j.at("poll_ns"),
                    j.at("idle_poll_ns"),
                    j.at("late_ns"),
                    j.at("watchdog_ns"),
                    j.at("restore_ns"),
                    j.at("action"),
                    {},
                    {}};
  for (const auto& p : j.at("ports")) {
    c.ports.push_back({p.at("name"), p.at("netns"), p.at("ifname"), p.at("handle"), p.at("parent"),
                       p.at("model"), p.at("xoff"), p.at("xon"), p.at("kmin"), p.at("kmax"),
                       p.at("pmax"), p.at("feeders")});
    c.ports.back().rate = p.value("rate", uint64_t{0});
    c.ports.back().burst = p.value("burst", uint32_t{0});
    c.ports.back().limit = p.value("limit", uint32_t{0});
    c.ports.back().mtu = p.value("mtu", uint32_t{1500});
    c.ports.back().mark_slot = p.value("mark_slot", -1);
    c.ports.back().red = p.value("red", false);
  }
  c.mark_table = j.value("mark_table", "");
  for (const auto& u : j.at("upstreams"))
    c.upstreams.push_back({u.at("name"), u.at("netns"), u.at("ifname"), u.at("handle"),
                           u.at("parent"), u.at("rate"), u.at("burst"), u.at("limit"), u.at("mtu"),
                           u.at("quantum_ns"), u.at("feeds_ifname"), u.at("port")});
  return c;
}

const char* daemon_kind(const Daemon& d) {
  return std::visit(
      Overload{[](const Stage&) { return "stage"; }, [](const Agent&) { return "agent"; },
               [](const Router&) { return "router"; }, [](const FabricAgent&) { return "fabric"; },
               [](const CongestionAgent&) { return "congestion"; }},
      d);
}

std::string daemon_name(const Daemon& d) {
  return std::visit(Overload{[](const Stage& s) { return "stage " + s.node; },
                             [](const Agent& a) { return "agent " + a.node; },
                             [](const Router& r) { return "frr " + r.node; },
                             [](const FabricAgent& f) { return "fabric " + f.region; },
                             [](const CongestionAgent&) { return std::string("congestion"); }},
                    d);
}

std::string daemon_text(const Daemon& d) {
  return std::visit(
      Overload{
          [](const Stage& st) {
            std::string s = "delayd " + st.node + " netns " + st.netns;
            for (const auto& q : st.queues)
              s += " | queue " + std::to_string(q.queue) + " delay " + format_duration(q.delay) +
                   (q.jitter.ns ? " jitter " + format_duration(q.jitter) : "") + " maxlen " +
                   std::to_string(q.maxlen) +
                   (q.mark >= 0 ? " mark " + std::to_string(q.mark) : "") + " (" + q.link + ")";
            return s;
          },
          [](const Agent& a) {
            std::string s = "agent " + a.node + " netns " + a.netns + " port " +
                            std::to_string(a.port) + " every " +
                            std::to_string(a.interval_ns / 1000) + "us misses " +
                            std::to_string(a.misses);
            for (const auto& path : a.paths)
              s += " | " + path.name + " dev " + path.dev + " peer " + path.peer.to_string() +
                   " metric " + std::to_string(path.metric);
            return s;
          },
          [](const Router& r) {
            std::string s = "router " + r.node + " netns " + r.netns + " asn " +
                            std::to_string(r.asn) + " id " + r.router_id.to_string() + " bfd " +
                            std::to_string(r.bfd_interval_ms) + "ms x" +
                            std::to_string(r.bfd_multiplier);
            for (const auto& n : r.networks) s += " network " + n.to_string();
            for (const auto& n : r.neighbors)
              s += " | " + n.wan + " neighbor " + n.addr.to_string() + " asn " +
                   std::to_string(n.asn) + " local-pref " + std::to_string(n.local_pref);
            return s;
          },
          [](const FabricAgent& f) {
            std::string s = "fabric " + f.region + " netns " + f.netns +
                            " host-route withdrawal: " + std::to_string(f.gpus.size()) + " GPUs, " +
                            std::to_string(f.tors.size()) + " ToRs, spines";
            for (const auto& sp : f.spine_nodes) s += " " + sp;
            return s;
          },
          [](const CongestionAgent& c) {
            size_t lossless = 0, ecn = 0;
            for (const auto& p : c.ports) {
              lossless += p.model == "lossless";
              ecn += p.model == "ecn";
            }
            return "congestion netns " + c.netns + " polls " + std::to_string(c.ports.size()) +
                   " switch queues (" + std::to_string(lossless) + " lossless" +
                   (ecn ? ", " + std::to_string(ecn) + " ecn" : std::string()) + ") every " +
                   std::to_string(c.poll_ns / 1000) + "us (idle " +
                   std::to_string(c.idle_poll_ns / 1000) + "us), pauses " +
                   std::to_string(c.upstreams.size()) + " upstream queues";
          },
      },
      d);
}

json to_json(const Stage& st) {
  json qs = json::array();
  for (const auto& q : st.queues)
    qs.push_back({{"queue", q.queue},
                  {"delay_ns", q.delay.ns},
                  {"jitter_ns", q.jitter.ns},
                  {"maxlen", q.maxlen},
                  {"link", q.link}});
  for (size_t i = 0; i < st.queues.size(); ++i)
    if (st.queues[i].mark >= 0) qs[i]["mark"] = st.queues[i].mark;
  json out = {{"netns", st.netns}, {"node", st.node}, {"queues", qs}};
  if (!st.mark_table.empty()) out["mark_table"] = st.mark_table;
  return out;
}

Stage stage_from_json(const json& j) {
  Stage stage{j.at("netns"), j.at("node"), {}};
  for (const auto& q : j.at("queues"))
    stage.queues.push_back({q.at("queue"), Duration{q.at("delay_ns")}, Duration{q.at("jitter_ns")},
                            q.at("maxlen"), q.at("link"), q.value("mark", -1)});
  stage.mark_table = j.value("mark_table", "");
  return stage;
}

json to_json(const Daemon& d) {
  json body = std::visit(Overload{[](const Stage& s) { return to_json(s); },
                                  [](const Agent& a) { return agent_json(a); },
                                  [](const Router& r) { return router_json(r); },
                                  [](const FabricAgent& f) { return fabric_json(f); },
                                  [](const CongestionAgent& c) { return to_json(c); }},
                         d);
  return {{"kind", daemon_kind(d)}, {"config", body}};
}

Result<Daemon> daemon_from_json(const json& j) {
  try {
    const std::string kind = j.at("kind");
    const json& c = j.at("config");
    if (kind == "stage") return stage_from_json(c);
    if (kind == "agent") return agent_from(c);
    if (kind == "router") return router_from(c);
    if (kind == "fabric") return fabric_from(c);
    if (kind == "congestion") return congestion_from_json(c);
    return fail("unknown daemon kind \"" + kind + "\"");
  } catch (const json::exception& e) {
    return fail(std::string("malformed daemon: ") + e.what());
  }
}

}  // namespace tb::plan
