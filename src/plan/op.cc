#include "plan/op.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/overload.h"
#include "plan/topology.h"
#include "shaping/backend.h"

namespace tb::plan {
namespace {

std::string endpoint_text(const Endpoint& e) {
  std::string s = e.netns + ":" + e.ifname;
  if (!e.master.empty()) s += "@" + e.master;
  return s;
}

nlohmann::json endpoint_json(const Endpoint& e) {
  return {{"netns", e.netns}, {"ifname", e.ifname}, {"alias", e.alias}, {"master", e.master}};
}

Endpoint endpoint_from(const nlohmann::json& j) {
  return Endpoint{j.at("netns"), j.at("ifname"), j.value("alias", ""), j.value("master", "")};
}

// "rate 10Mbit delay 5ms jitter 1ms reorder loss 0.1% mtu 1500"; unset figures are left out.
std::string shape_text(const shaping::LinkShape& s) {
  std::string t = "rate " + (s.rate.bps > 0 ? format_rate(s.rate) : std::string("unlimited"));
  if (s.delay.ns) t += " delay " + format_duration(s.delay);
  if (s.jitter.ns) t += " jitter " + format_duration(s.jitter);
  if (s.reorder) t += " reorder";
  if (s.loss_pct > 0) t += fmt::format(" loss {:g}%", s.loss_pct);
  t += " mtu " + std::to_string(s.mtu);
  if (!s.qos.empty()) t += " qos " + shaping::qos_text(s.qos);
  if (!s.congestion.empty()) t += " " + congestion_text(s.congestion);
  return t;
}

}  // namespace

std::string to_text(const Op& op) {
  return std::visit(
      Overload{
          [](const CreateNetns& o) { return "netns  " + o.netns + "  node=" + o.node; },
          [](const CreateVeth& o) {
            return "veth   " + endpoint_text(o.a) + " <-> " + endpoint_text(o.b) +
                   "  mtu=" + std::to_string(o.mtu);
          },
          [](const CreateBridge& o) {
            return "bridge " + o.netns + ":" + o.ifname + "  mtu=" + std::to_string(o.mtu);
          },
          [](const AddAddr& o) {
            return "addr   " + o.netns + ":" + o.ifname + "  " + o.addr.to_string() +
                   (o.noprefixroute ? "  noprefixroute" : "");
          },
          [](const AddRoute& o) {
            std::string s = "route  " + o.netns + "  " + o.dst.to_string();
            for (const auto& nh : o.nexthops) {
              if (o.nexthops.size() > 1) s += "  nexthop";
              if (nh.via) s += " via " + nh.via->to_string() + " onlink";
              s += " dev " + nh.ifname;
              if (o.nexthops.size() > 1) s += " weight " + std::to_string(nh.weight);
            }
            if (o.src) s += "  src " + o.src->to_string();
            if (o.metric) s += "  metric " + std::to_string(o.metric);
            if (!o.congctl.empty()) s += "  congctl " + o.congctl;
            return s;
          },
          [](const SetSysctl& o) { return "sysctl " + o.netns + "  " + o.key + "=" + o.value; },
          [](const WriteHosts& o) {
            size_t lines = 0;
            for (char c : o.content) lines += c == '\n';
            return "hosts  " + o.netns + "  (" + std::to_string(lines) + " lines)";
          },
          [](const SetShape& o) {
            return "shape  " + o.netns + ":" + o.ifname + "  " + o.backend + " " +
                   shape_text(o.shape);
          },
          [](const AddStageRule& o) {
            std::string s =
                "stage  " + o.netns + ":" + o.ifname + (o.egress ? "  egress" : "  ingress");
            if (o.queue) s += " nfqueue " + std::to_string(o.queue);
            if (o.loss_ppm) s += " loss " + std::to_string(o.loss_ppm) + " ppm";
            return s;
          },
          [](const CreateRxe& o) {
            return "rxe    " + o.netns + ":" + o.ifname + "  " + o.name + "  addr " +
                   o.addr.to_string();
          },
          [](const StartDaemon& o) { return daemon_text(o.daemon); },
          [](const CreateVxlan& o) {
            std::string s = "vxlan  " + o.netns + ":" + o.ifname;
            if (!o.master.empty()) s += "@" + o.master;
            return s + "  vni=" + std::to_string(o.vni) + " local=" + o.local.to_string() +
                   " remote=" + o.remote.to_string() + " port=" + std::to_string(o.port) +
                   " mtu=" + std::to_string(o.mtu) + "  host=" + o.host;
          },
      },
      op);
}

const std::string& op_netns(const Op& op) {
  return std::visit(Overload{
                        [](const CreateVeth& o) -> const std::string& { return o.a.netns; },
                        [](const auto& o) -> const std::string& { return o.netns; },
                    },
                    op);
}

nlohmann::json to_json(const Op& op) {
  return std::visit(
      Overload{
          [](const CreateNetns& o) -> nlohmann::json {
            return {{"op", "netns"}, {"netns", o.netns}, {"node", o.node}, {"marker", o.marker}};
          },
          [](const CreateVeth& o) -> nlohmann::json {
            return {{"op", "veth"},
                    {"a", endpoint_json(o.a)},
                    {"b", endpoint_json(o.b)},
                    {"mtu", o.mtu}};
          },
          [](const CreateBridge& o) -> nlohmann::json {
            return {{"op", "bridge"},
                    {"netns", o.netns},
                    {"ifname", o.ifname},
                    {"alias", o.alias},
                    {"mtu", o.mtu}};
          },
          [](const AddAddr& o) -> nlohmann::json {
            nlohmann::json j = {{"op", "addr"},
                                {"netns", o.netns},
                                {"ifname", o.ifname},
                                {"addr", o.addr.to_string()}};
            if (o.noprefixroute) j["noprefixroute"] = true;
            return j;
          },
          [](const AddRoute& o) -> nlohmann::json {
            nlohmann::json nhs = nlohmann::json::array();
            for (const auto& nh : o.nexthops) {
              nlohmann::json n = {{"dev", nh.ifname}, {"weight", nh.weight}};
              if (nh.via) n["via"] = nh.via->to_string();
              nhs.push_back(n);
            }
            nlohmann::json j = {{"op", "route"},
                                {"netns", o.netns},
                                {"dst", o.dst.to_string()},
                                {"nexthops", nhs},
                                {"metric", o.metric}};
            if (o.src) j["src"] = o.src->to_string();
            if (!o.congctl.empty()) j["congctl"] = o.congctl;
            return j;
          },
          [](const SetSysctl& o) -> nlohmann::json {
            return {{"op", "sysctl"}, {"netns", o.netns}, {"key", o.key}, {"value", o.value}};
          },
          [](const WriteHosts& o) -> nlohmann::json {
            // The journal keeps only the marker line: undo needs nothing else.
            return {{"op", "hosts"},
                    {"netns", o.netns},
                    {"marker", o.content.substr(0, o.content.find('\n'))}};
          },
          [](const AddStageRule& o) -> nlohmann::json {
            return {{"op", "stage-rule"}, {"netns", o.netns}, {"ifname", o.ifname},
                    {"egress", o.egress}, {"queue", o.queue}, {"loss_ppm", o.loss_ppm},
                    {"marker", o.marker}};
          },
          [](const SetShape& o) -> nlohmann::json {
            nlohmann::json j{{"op", "shape"},
                             {"netns", o.netns},
                             {"ifname", o.ifname},
                             {"backend", o.backend},
                             {"rate_bps", o.shape.rate.bps},
                             {"delay_ns", o.shape.delay.ns},
                             {"jitter_ns", o.shape.jitter.ns},
                             {"loss_pct", o.shape.loss_pct},
                             {"mtu", o.shape.mtu}};
            if (o.shape.reorder) j["jitter_mode"] = "reorder";
            if (!o.shape.qos.empty()) j["qos"] = qos_to_json(o.shape.qos);
            if (!o.shape.congestion.empty()) j["congestion"] = to_json(o.shape.congestion);
            return j;
          },
          [](const CreateRxe& o) -> nlohmann::json {
            return {{"op", "rxe"},    {"netns", o.netns}, {"ifname", o.ifname},
                    {"node", o.node}, {"name", o.name},   {"addr", o.addr.to_string()}};
          },
          [](const StartDaemon& o) -> nlohmann::json {
            return {{"op", "daemon"}, {"netns", o.netns}, {"daemon", to_json(o.daemon)}};
          },
          [](const CreateVxlan& o) -> nlohmann::json {
            return {{"op", "vxlan"},
                    {"netns", o.netns},
                    {"ifname", o.ifname},
                    {"alias", o.alias},
                    {"master", o.master},
                    {"vni", o.vni},
                    {"local", o.local.to_string()},
                    {"remote", o.remote.to_string()},
                    {"port", o.port},
                    {"mtu", o.mtu},
                    {"host", o.host}};
          },
      },
      op);
}

Result<Op> op_from_json(const nlohmann::json& j) {
  try {
    const std::string kind = j.at("op");
    if (kind == "netns") return CreateNetns{j.at("netns"), j.at("node"), j.at("marker")};
    if (kind == "veth")
      return CreateVeth{endpoint_from(j.at("a")), endpoint_from(j.at("b")), j.at("mtu")};
    if (kind == "bridge")
      return CreateBridge{j.at("netns"), j.at("ifname"), j.value("alias", ""), j.at("mtu")};
    if (kind == "addr") {
      auto p = parse_prefix(j.at("addr").get<std::string>());
      if (!p) return std::unexpected(p.error());
      return AddAddr{j.at("netns"), j.at("ifname"), *p, j.value("noprefixroute", false)};
    }
    if (kind == "route") {
      AddRoute r{j.at("netns"),
                 {},
                 {},
                 std::nullopt,
                 j.value("metric", 0),
                 j.value("congctl", std::string())};
      auto dst = parse_prefix(j.at("dst").get<std::string>());
      if (!dst) return std::unexpected(dst.error());
      r.dst = *dst;
      for (const auto& n : j.at("nexthops")) {
        Nexthop nh{n.at("dev"), std::nullopt, n.value("weight", 1)};
        if (n.contains("via")) {
          auto via = parse_ipv4(n.at("via").get<std::string>());
          if (!via) return std::unexpected(via.error());
          nh.via = *via;
        }
        r.nexthops.push_back(nh);
      }
      if (j.contains("src")) {
        auto src = parse_ipv4(j.at("src").get<std::string>());
        if (!src) return std::unexpected(src.error());
        r.src = *src;
      }
      return r;
    }
    if (kind == "sysctl") return SetSysctl{j.at("netns"), j.at("key"), j.at("value")};
    if (kind == "hosts") return WriteHosts{j.at("netns"), j.at("marker").get<std::string>() + "\n"};
    if (kind == "shape") {
      shaping::LinkShape s{Rate{j.at("rate_bps").get<double>()},
                           Duration{j.at("delay_ns").get<int64_t>()},
                           Duration{j.at("jitter_ns").get<int64_t>()},
                           j.at("loss_pct").get<double>(),
                           j.at("mtu").get<int>(),
                           j.value("jitter_mode", "ordered") == "reorder"};
      if (j.contains("qos")) s.qos = qos_from_json(j.at("qos"));
      if (j.contains("congestion")) s.congestion = shape_congestion_from_json(j.at("congestion"));
      return SetShape{j.at("netns"), j.at("ifname"), s, j.at("backend")};
    }
    if (kind == "stage-rule")  // journals written before 0.0001 % steps say loss_per_10000
      return AddStageRule{j.at("netns"),
                          j.at("ifname"),
                          j.at("egress"),
                          j.at("queue"),
                          j.contains("loss_ppm") ? j.at("loss_ppm").get<uint32_t>()
                                                 : j.at("loss_per_10000").get<uint32_t>() * 100,
                          j.at("marker")};
    if (kind == "rxe") {
      auto addr = parse_ipv4(j.at("addr").get<std::string>());
      if (!addr) return std::unexpected(addr.error());
      return CreateRxe{j.at("netns"), j.at("ifname"), j.at("node"), j.at("name"), *addr};
    }
    if (kind == "vxlan") {
      auto local = parse_ipv4(j.at("local").get<std::string>());
      if (!local) return std::unexpected(local.error());
      auto remote = parse_ipv4(j.at("remote").get<std::string>());
      if (!remote) return std::unexpected(remote.error());
      return CreateVxlan{j.at("netns"),
                         j.at("ifname"),
                         j.value("alias", ""),
                         j.value("master", ""),
                         j.at("vni"),
                         *local,
                         *remote,
                         j.at("port"),
                         j.at("mtu"),
                         j.value("host", "")};
    }
    if (kind == "daemon") {
      auto d = daemon_from_json(j.at("daemon"));
      if (!d) return std::unexpected(d.error());
      return StartDaemon{j.at("netns"), std::move(*d)};
    }
    return fail("unknown op \"" + kind + "\" in journal");
  } catch (const nlohmann::json::exception& e) {
    return fail(std::string("malformed journal entry: ") + e.what());
  }
}

}  // namespace tb::plan
