#include "failover/fabric.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/netlink.h>
#include <poll.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/events.h"
#include "core/ipv4.h"
#include "core/unique_fd.h"
#include "netlink/dump.h"
#include "netlink/message.h"
#include "netlink/netns.h"
#include "netlink/route_monitor.h"
#include "netlink/socket.h"

namespace tb::failover {
namespace {

constexpr int64_t kRecheckNs = 500'000'000;

Result<netlink::NlSocket> socket_in(const std::string& netns) {
  UniqueFd ns(::open(netlink::netns_path(netns).c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns) return sys_fail("fabric: open namespace " + netns);
  return netlink::NlSocket::open_in(ns.get());
}

// Interface name -> (ifindex, whether it is up with carrier), in one namespace.
Result<std::map<std::string, std::pair<int, bool>>> links_of(netlink::NlSocket& nl,
                                                             const std::string& netns) {
  auto links = netlink::list_links(nl, "netns " + netns);
  if (!links) return std::unexpected(links.error());
  std::map<std::string, std::pair<int, bool>> out;
  for (const auto& l : *links)
    out[l.name] = {l.ifindex, (l.flags & IFF_UP) && (l.flags & IFF_LOWER_UP)};
  return out;
}

struct TorState {
  netlink::RouteMonitor mon;
  netlink::NlSocket nl;
};

struct SpineState {
  netlink::NlSocket nl;
  std::map<std::string, std::pair<int, bool>> links;
};

}  // namespace

nlohmann::json to_json(const FabricConfig& c) {
  nlohmann::json tors = nlohmann::json::array(), gpus = nlohmann::json::array();
  for (const auto& t : c.tors)
    tors.push_back({{"node", t.node},
                    {"netns", t.netns},
                    {"spine_port", t.spine_port},
                    {"addr", t.addr.to_string()}});
  for (const auto& g : c.gpus) {
    nlohmann::json ports = nlohmann::json::array();
    for (const auto& p : g.ports) ports.push_back({{"tor", p.tor}, {"port", p.port}});
    gpus.push_back({{"node", g.node}, {"addr", g.addr.to_string()}, {"ports", ports}});
  }
  return {{"region", c.region},
          {"spine_nodes", c.spine_nodes},
          {"spine_netns", c.spine_netns},
          {"tors", tors},
          {"gpus", gpus}};
}

Result<FabricConfig> fabric_config_from_json(const nlohmann::json& j) {
  try {
    FabricConfig c;
    c.region = j.at("region");
    c.spine_nodes = j.at("spine_nodes").get<std::vector<std::string>>();
    c.spine_netns = j.at("spine_netns").get<std::vector<std::string>>();
    for (const auto& t : j.at("tors")) {
      auto addr = parse_ipv4(t.at("addr").get<std::string>());
      if (!addr) return bad_input("fabric config: ToR address " + t.at("addr").dump());
      c.tors.push_back({t.at("node"), t.at("netns"), t.at("spine_port"), *addr});
    }
    for (const auto& g : j.at("gpus")) {
      auto addr = parse_ipv4(g.at("addr").get<std::string>());
      if (!addr) return bad_input("fabric config: GPU address " + g.at("addr").dump());
      FabricConfig::Gpu gpu{g.at("node"), *addr, {}};
      for (const auto& p : g.at("ports")) {
        const int tor = p.at("tor");
        if (tor < 0 || tor >= static_cast<int>(c.tors.size()))
          return bad_input("fabric config: GPU " + gpu.node + " names ToR " + std::to_string(tor) +
                           " of " + std::to_string(c.tors.size()));
        gpu.ports.push_back({tor, p.at("port")});
      }
      c.gpus.push_back(std::move(gpu));
    }
    if (c.spine_netns.empty() || c.spine_netns.size() != c.spine_nodes.size() || c.tors.empty())
      return bad_input("fabric config: spines (node and netns each) and ToRs are needed");
    return c;
  } catch (const nlohmann::json::exception& e) {
    return bad_input(std::string("fabric config: ") + e.what());
  }
}

std::vector<int> fabric_next_hops(const std::vector<FabricConfig::Port>& ports,
                                  const std::vector<bool>& delivers) {
  std::vector<int> via;
  for (size_t i = 0; i < ports.size() && i < delivers.size(); ++i)
    if (delivers[i]) via.push_back(ports[i].tor);
  if (via.size() == ports.size()) via.clear();
  return via;
}

Status run_fabric(const FabricConfig& c, const std::string& events_path,
                  const std::atomic<bool>& stop) {
  std::vector<TorState> tors;
  for (const auto& t : c.tors) {
    auto mon = netlink::RouteMonitor::open(t.netns);
    if (!mon) return std::unexpected(mon.error());
    auto nl = socket_in(t.netns);
    if (!nl) return std::unexpected(nl.error());
    tors.push_back({std::move(*mon), std::move(*nl)});
  }
  std::vector<SpineState> spines;
  for (const auto& ns : c.spine_netns) {
    auto nl = socket_in(ns);
    if (!nl) return std::unexpected(nl.error());
    auto links = links_of(*nl, ns);
    if (!links) return std::unexpected(links.error());
    spines.push_back({std::move(*nl), std::move(*links)});
  }
  std::vector<std::vector<int>> gpus_of(c.tors.size());  // ToR -> GPUs with a port on it
  for (size_t g = 0; g < c.gpus.size(); ++g)
    for (const auto& p : c.gpus[g].ports) gpus_of[p.tor].push_back(static_cast<int>(g));

  std::vector<std::vector<bool>> delivers(c.gpus.size());
  for (size_t g = 0; g < c.gpus.size(); ++g) delivers[g].assign(c.gpus[g].ports.size(), true);
  // What the spines hold per GPU; unknown at start (an earlier agent may have left a /32).
  std::vector<std::optional<std::vector<int>>> installed(c.gpus.size());
  std::vector<std::string> last_error(c.gpus.size());

  auto names = [&](const std::vector<int>& idx) {
    nlohmann::json out = nlohmann::json::array();
    for (int i : idx) out.push_back(c.tors[i].node);
    return out;
  };
  auto apply = [&](size_t g) {
    const auto& gpu = c.gpus[g];
    const std::vector<int> want = fabric_next_hops(gpu.ports, delivers[g]);
    if (installed[g] && *installed[g] == want) return;
    const Prefix dst{gpu.addr, 32};
    for (size_t k = 0; k < spines.size(); ++k) {
      Status r;
      if (want.empty()) {
        r = spines[k].nl.call(netlink::del_route(dst, 0),
                              "fabric: remove " + dst.to_string() + " on " + c.spine_nodes[k]);
        if (!r && (r.error().sys_errno == ESRCH || r.error().sys_errno == ENOENT)) r = {};
      } else {
        netlink::RouteSpec spec{dst, {}, std::nullopt, 0};
        for (int t : want) {
          auto it = spines[k].links.find(c.tors[t].spine_port);
          const int ifindex = it == spines[k].links.end() ? 0 : it->second.first;
          spec.nexthops.push_back({ifindex, c.tors[t].addr, true, 1});
        }
        r = spines[k].nl.call(netlink::replace_route(spec),
                              "fabric: route " + dst.to_string() + " on " + c.spine_nodes[k]);
      }
      if (!r) {
        if (last_error[g] != r.error().message)  // once per distinct failure, not per retry
          (void)append_event(events_path, {{"event", "fabric_error"},
                                           {"region", c.region},
                                           {"gpu", gpu.node},
                                           {"error", r.error().message}});
        last_error[g] = r.error().message;
        installed[g].reset();  // retried at the next recheck
        return;
      }
    }
    last_error[g].clear();
    const bool first = !installed[g].has_value();
    installed[g] = want;
    if (first && want.empty()) return;  // start-up: nothing was withdrawn
    nlohmann::json ev = {{"event", want.empty() ? "fabric_restore" : "fabric_withdraw"},
                         {"region", c.region},
                         {"gpu", gpu.node},
                         {"addr", gpu.addr.to_string()},
                         {"spines", c.spine_nodes.size()}};
    if (!want.empty()) {
      std::vector<int> lost;
      for (size_t i = 0; i < gpu.ports.size(); ++i)
        if (!delivers[g][i]) lost.push_back(gpu.ports[i].tor);
      ev["via"] = names(want);
      ev["withdrawn_from"] = names(lost);
    }
    (void)append_event(events_path, ev);
  };
  // Asks ToR `t` how it forwards to each of its GPUs; applies what changed.
  auto check_tor = [&](size_t t) {
    auto links = links_of(tors[t].nl, c.tors[t].netns);
    if (!links) return;  // the next notification or recheck tries again
    for (int g : gpus_of[t]) {
      const auto& gpu = c.gpus[g];
      for (size_t i = 0; i < gpu.ports.size(); ++i) {
        if (gpu.ports[i].tor != static_cast<int>(t)) continue;
        auto it = links->find(gpu.ports[i].port);
        bool ok = it != links->end() && it->second.second;
        if (ok) {
          auto m = netlink::lookup_route(tors[t].nl, gpu.addr, "netns " + c.tors[t].netns);
          ok = m && m->dst_len == 32 && m->oif == it->second.first;
        }
        delivers[g][i] = ok;
      }
      apply(g);
    }
  };

  for (size_t t = 0; t < tors.size(); ++t) check_tor(t);
  int64_t next_recheck = monotonic_ns() + kRecheckNs;
  std::vector<pollfd> pfds(tors.size());
  while (!stop.load()) {
    for (size_t t = 0; t < tors.size(); ++t) pfds[t] = {tors[t].mon.fd(), POLLIN, 0};
    const int wait_ms =
        static_cast<int>(std::clamp<int64_t>((next_recheck - monotonic_ns()) / 1'000'000, 0, 100));
    const int n = ::poll(pfds.data(), pfds.size(), wait_ms);
    if (n > 0)
      for (size_t t = 0; t < tors.size(); ++t)
        if (pfds[t].revents) {
          (void)tors[t].mon.drain();  // what changed does not matter: the ToR is asked again
          check_tor(t);
        }
    if (monotonic_ns() >= next_recheck) {
      for (size_t t = 0; t < tors.size(); ++t) check_tor(t);
      next_recheck = monotonic_ns() + kRecheckNs;
    }
  }
  return {};
}

}  // namespace tb::failover
