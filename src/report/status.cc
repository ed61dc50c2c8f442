#include "report/status.h"

#include <fmt/chrono.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <map>
#include <set>

#include "lab/daemons.h"
#include "report/congestion.h"
#include "report/format.h"
#include "runner/supervisor.h"
#include "shaping/backend.h"

namespace tb::report {
namespace {

std::string figures(Rate r, Duration d, double loss) {
  std::string s = format_rate(r) + " " + format_duration(d);
  if (loss > 0) s += " " + std::to_string(loss).substr(0, 4) + "%";
  return s;
}

const apply::IfaceInfo* find_iface(const LiveState* live, const std::string& netns,
                                   const std::string& ifname) {
  if (!live) return nullptr;
  auto it = live->find(netns);
  if (it == live->end()) return nullptr;
  for (const auto& i : it->second)
    if (i.ifname == ifname) return &i;
  return nullptr;
}

// "up", "down", "missing" or "unknown" (no live view without root). On one host's part of a
// lab over several (`here`, lab state's host): a link with no end here is "on host X"; a
// tunnel's state is its end's here, "up (tunnel to X)", the far end being X's to show.
std::string link_state(const plan::Topology& t, const plan::Link& l, const LiveState* live,
                       const std::string& here = "") {
  const plan::Node* na = t.node(l.a.node);
  const plan::Node* nb = t.node(l.b.node);
  const bool a_here = here.empty() || na->host == here;
  const bool b_here = here.empty() || nb->host == here;
  if (!a_here && !b_here) return "on host " + na->host;
  if (!live) return "unknown";
  const auto* a = a_here ? find_iface(live, na->netns, l.a.ifname) : nullptr;
  const auto* b = b_here ? find_iface(live, nb->netns, l.b.ifname) : nullptr;
  if ((a_here && !a) || (b_here && !b)) return "missing";
  if (!a_here || !b_here) {
    const auto* end = a_here ? a : b;
    return std::string(end->oper_up ? "up" : "down") + " (tunnel to " +
           (a_here ? nb->host : na->host) + ")";
  }
  return a->oper_up && b->oper_up ? "up" : "down";
}

}  // namespace

std::string figures_text(const plan::EmulatedFigures& f) {
  std::string s = "rate " + (f.rate.bps > 0 ? format_rate(f.rate) : std::string("unlimited")) +
                  ", delay " + format_duration(f.delay);
  if (f.jitter.ns) s += ", jitter " + format_duration(f.jitter);
  if (f.loss_pct > 0) s += fmt::format(", loss {:g}%", f.loss_pct);
  return s;
}

nlohmann::json backends_json(const lab::LabState& st) {
  nlohmann::json j = {
      {"topology", "netlink (rtnetlink via libmnl): named netns, veth, bridge, routes"}};
  if (st.shaping.empty() || st.shaping == "none") {
    j["shaping"] = "none: links run unshaped at host veth speed";
  } else if (st.shaping == "netem") {
    j["shaping"] = "netem: rate (tbf child), delay, jitter and loss in the kernel";
  } else {
    j["shaping"] =
        st.shaping + " rate in the kernel" +
        (st.stages.empty() ? std::string()
                           : "; delay and jitter in " + std::to_string(st.stages.size()) +
                                 " userspace NFQUEUE delay stages (tb-delayd, "
                                 "fail-closed); loss by nft numgen");
  }
  // The supervisor's view of its children: a dead stage is a broken (dropping) link; the
  // others (failover and fabric agents, routing daemons) are listed apart.
  std::ifstream in(lab::lab_dir(st.lab) + "/supervisor.json");
  auto sup = nlohmann::json::parse(in, nullptr, false);
  nlohmann::json stages = nlohmann::json::array(), daemons = nlohmann::json::array();
  int down = 0;
  for (const auto& c : runner::states_from_json(sup)) {
    nlohmann::json e = {{"name", c.name},     {"pid", c.pid},           {"running", c.running},
                        {"broken", c.broken}, {"restarts", c.restarts}, {"last_exit", c.last_exit}};
    if (!c.name.starts_with("stage ")) {
      daemons.push_back(e);
      continue;
    }
    // What the stage measured of itself (tb-delayd's stats file, rewritten every 500 ms).
    for (const auto& stage : st.stages)
      if (c.name == "stage " + stage.node) {
        std::ifstream sf(lab::stage_stats_path(st.lab, stage.netns));
        auto stats = nlohmann::json::parse(sf, nullptr, false);
        if (stats.is_object()) {
          // Per queue (link direction): the overhead the stage measured of itself and takes out
          // of the delay (stage/calibration.h), and how late it still released.
          nlohmann::json queues = nlohmann::json::array();
          for (const auto& q : stats.value("queues", nlohmann::json::array()))
            queues.push_back({{"queue", q.value("num", 0)},
                              {"delay_us", q.value("delay_us", 0.0)},
                              {"overhead_us", q.value("overhead_us", 0.0)},
                              {"late_mean_us", q.value("late_mean_us", 0.0)}});
          e["measured"] = {
              {"packets", stats.value("packets", 0)},
              {"cpu_us_per_packet", stats.value("cpu_us_per_packet", 0.0)},
              {"method", "tb-delayd getrusage (user+sys) / packets, stats file"},
              {"scheduling", stats.value("scheduling", "")},
              {"calibrated", stats.value("calibrated", false)},
              // The release cost in the overhead: the stage's own loopback probes'
              // median, or the constant where it cannot probe (stage/stats.h).
              {"release_us", stats.value("release", nlohmann::json::object()).value("us", 0.0)},
              {"release_source",
               stats.value("release", nlohmann::json::object()).value("source", "")},
              {"queues", queues}};
        }
      }
    stages.push_back(e);
    down += !c.running;
  }
  if (!st.stages.empty()) {
    if (sup.is_discarded()) down = static_cast<int>(st.stages.size());
    j["stages"] = stages;
    j["stages_down"] = down;
  }
  if (!daemons.empty()) j["daemons"] = daemons;
  // Soft-RoCE on the rail (apply/rxe.h): what bench/run's `--transport rdma` can use.
  j["rdma"] = st.rdma == "rxe"
                  ? "rxe (Soft-RoCE) on every GPU rail NIC: " + st.rdma_why
                  : "none, collectives run TCP: " +
                        (st.rdma_why.empty() ? std::string("not probed") : st.rdma_why);
  if (!st.rxe.empty()) {
    nlohmann::json devs = nlohmann::json::array();
    for (const auto& d : st.rxe)
      devs.push_back({{"node", d.node},
                      {"ifname", d.ifname},
                      {"device", d.name},
                      {"gid_index", d.gid_index},
                      {"gid", d.gid}});
    j["rxe"] = devs;
  }
  return j;
}

std::string backends_text(const lab::LabState& st) {
  const auto j = backends_json(st);
  std::string s = "backends: topology " + j["topology"].get<std::string>() +
                  "\n          shaping " + j["shaping"].get<std::string>() + "\n" +
                  "          rdma " + j["rdma"].get<std::string>() + "\n";
  if (j.contains("stages")) {
    int restarts = 0;
    for (const auto& c : j["stages"]) restarts += c["restarts"].get<int>();
    uint64_t packets = 0;
    double cpu_us = 0;
    for (const auto& c : j["stages"])
      if (c.contains("measured")) {
        const uint64_t n = c["measured"]["packets"];
        packets += n;
        cpu_us += c["measured"]["cpu_us_per_packet"].get<double>() * static_cast<double>(n);
      }
    s += "          stages " + std::to_string(j["stages"].size() - j["stages_down"].get<int>()) +
         "/" + std::to_string(st.stages.size()) + " running, " + std::to_string(restarts) +
         " restarts, " + std::to_string(packets) + " packets delayed";
    if (packets > 0)
      s += ", " + std::to_string(static_cast<int>(cpu_us / static_cast<double>(packets))) +
           " us CPU per packet (getrusage of the stages)";
    if (j["stages_down"].get<int>() > 0)
      s += " — BROKEN: links through a stopped stage drop every packet (fail-closed); `testbedctl "
           "link " +
           st.lab + " reset A B` (or set) on one of them starts it again";
    s += "\n";
    // Each stage's scheduling and calibrated overhead (the range over its queues).
    for (const auto& c : j["stages"]) {
      if (!c.contains("measured")) continue;
      const auto& m = c["measured"];
      std::string line = "            " + c["name"].get<std::string>() + ": " +
                         m.value("scheduling", std::string("?"));
      if (!m.value("calibrated", false)) {
        line += ", uncalibrated (its overhead adds to every delay)";
      } else if (!m["queues"].empty()) {
        double lo = 1e18, hi = 0, late = 0;
        for (const auto& q : m["queues"]) {
          lo = std::min(lo, q["overhead_us"].get<double>());
          hi = std::max(hi, q["overhead_us"].get<double>());
          late = std::max(late, q["late_mean_us"].get<double>());
        }
        line +=
            fmt::format(", overhead {:.0f}", lo) +
            (hi - lo >= 1 ? fmt::format("-{:.0f}", hi) : std::string()) +
            fmt::format(
                " us measured and taken out of the delay ({} queues; release {:.0f} us, {}), "
                "releases {:.0f} us late (worst queue mean)",
                m["queues"].size(), m.value("release_us", 0.0),
                m.value("release_source", std::string()) == "probe" ? "probed" : "constant", late);
      }
      s += line + "\n";
    }
  }
  if (j.contains("daemons")) {
    s += "          daemons";
    for (const auto& c : j["daemons"])
      s += " " + c["name"].get<std::string>() + " (" +
           (c["running"].get<bool>() ? "running" : "STOPPED") + ", " +
           std::to_string(c["restarts"].get<int>()) + " restarts)";
    s += "\n";
  }
  return s;
}

int processes_down(const nlohmann::json& backends) {
  int down = backends.value("stages_down", 0);
  for (const auto& c : backends.value("daemons", nlohmann::json::array()))
    down += !c.value("running", false);
  return down;
}

std::string summary_text(const plan::Topology& t) {
  std::map<std::string, int> kinds;
  for (const auto& n : t.nodes) kinds[to_string(n.kind)]++;
  std::string s = std::to_string(t.nodes.size()) + " nodes (";
  bool first = true;
  for (const char* k : {"gpu", "server", "tor", "spine", "vpc", "transit-router"})
    if (kinds[k]) {
      s += (first ? "" : ", ") + std::to_string(kinds[k]) + " " + k;
      first = false;
    }
  return s + "), " + std::to_string(t.links.size()) + " links";
}

std::string status_text(const lab::LabState& st, const LiveState* live,
                        const std::map<size_t, plan::EmulatedFigures>& scenario,
                        const congestion::Counters* congestion) {
  const std::time_t created = st.created_unix;
  std::tm local{};
  localtime_r(&created, &local);
  const std::string when = fmt::format("{:%Y-%m-%d %H:%M:%S}", local);
  std::string s = "lab " + st.lab + "  " + st.phase + " since " + when + "  scenario " +
                  st.scenario + "\n" + summary_text(st.topo) + "\n" + backends_text(st);
  if (!st.host.empty()) {
    int here = 0;
    for (const auto& n : st.topo.nodes) here += n.host == st.host;
    s += "host: " + st.host + "'s part (" + std::to_string(here) + " of the nodes; plan digest " +
         st.digest + "); links on other hosts are theirs to show\n";
  }
  if (!live) s += "live state: not read (needs root); showing the recorded topology\n";
  s += "\nNODES\n" + cell("NODE", 14) + cell("KIND", 14) + cell("NETNS", 22) + "ADDRESSES\n";
  for (const auto& n : st.topo.nodes) {
    std::string addrs;
    for (const auto& [role, a] : n.addrs) addrs += role + " " + a.to_string() + "  ";
    s += cell(n.name, 14) + cell(to_string(n.kind), 14) + cell(n.netns, 22) + addrs + "\n";
  }
  s += "\nLINKS (real = the scenario's figures; emulated = real / scale, configured)\n" +
       cell("TIER", 11) + cell("A", 18) + cell("B", 18) + cell("PROFILE", 16) + cell("REAL", 18) +
       cell("EMULATED", 18) + cell("CONGESTION", 11) + "STATE\n";
  std::set<std::string> notes;
  for (const auto& l : st.topo.links) {
    s += cell(to_string(l.tier), 11) + cell(l.a.node + ":" + l.a.ifname, 18) +
         cell(l.b.node + ":" + l.b.ifname, 18) +
         cell(l.profile + (l.role.empty() ? "" : "/" + l.role), 16) +
         cell(figures(l.real.rate, l.real.delay, l.real.loss_pct), 18) +
         cell(figures(l.emulated.rate, l.emulated.delay, l.emulated.loss_pct), 18) +
         cell(l.emulated.congestion.model, 11) + link_state(st.topo, l, live, st.host) + "\n";
    for (const auto& n : l.emulated.notes) notes.insert(l.profile + ": " + n);
  }
  if (!scenario.empty()) {
    s += "\nCHANGED LINKS (`link set` or a fault; shaped, and judged by verify, by the figures in "
         "force; `link LAB reset A B` restores the scenario's)\n";
    for (const auto& [i, f] : scenario) {
      if (i >= st.topo.links.size()) continue;
      const auto& l = st.topo.links[i];
      s += "  " + l.a.node + ":" + l.a.ifname + " <-> " + l.b.node + ":" + l.b.ifname +
           "  in force: " + figures_text(l.emulated) + "; the scenario's: " + figures_text(f) +
           "\n";
    }
  }
  if (congestion) s += congestion_status_text(*congestion, st.topo);
  std::string qos;
  for (const auto& l : st.topo.links)
    if (!l.emulated.qos.empty())
      qos += "  " + l.a.node + ":" + l.a.ifname + " <-> " + l.b.node + ":" + l.b.ifname + "  " +
             shaping::qos_text(l.emulated.qos) + "\n";
  if (!qos.empty())
    s += "\nQOS CLASSES (HTB classes under each WAN link's rate, both directions; share..ceiling "
         "of the link's rate, classified by DSCP)\n" +
         qos;
  if (!notes.empty()) {
    s += "\nNOT EMULATED\n";
    for (const auto& n : notes) s += "  " + n + "\n";
  }
  return s;
}

nlohmann::json status_json(const lab::LabState& st, const LiveState* live,
                           const std::map<size_t, plan::EmulatedFigures>& scenario,
                           const congestion::Counters* congestion) {
  nlohmann::json nodes = nlohmann::json::array(), links = nlohmann::json::array();
  for (const auto& n : st.topo.nodes) {
    nlohmann::json j = {
        {"name", n.name}, {"kind", to_string(n.kind)}, {"netns", n.netns}, {"region", n.region}};
    if (!n.host.empty()) j["host"] = n.host;
    for (const auto& [role, a] : n.addrs) j["addrs"][role] = a.to_string();
    if (live && live->contains(n.netns)) {
      nlohmann::json ifs = nlohmann::json::array();
      for (const auto& i : live->at(n.netns)) {
        nlohmann::json addrs = nlohmann::json::array();
        for (const auto& a : i.addrs) addrs.push_back(a.to_string());
        ifs.push_back({{"ifname", i.ifname},
                       {"kind", i.kind},
                       {"admin_up", i.admin_up},
                       {"oper_up", i.oper_up},
                       {"mtu", i.mtu},
                       {"addrs", addrs},
                       {"rx_bytes", i.rx_bytes},
                       {"tx_bytes", i.tx_bytes}});
      }
      j["interfaces"] = ifs;
    }
    nodes.push_back(j);
  }
  auto topo = plan::to_json(st.topo);
  for (size_t i = 0; i < st.topo.links.size(); ++i) {
    auto j = topo["links"][i];
    j["state"] = link_state(st.topo, st.topo.links[i], live, st.host);
    // issue 32: the model emulated and, with an agent, its counters at each end.
    j["congestion"] = congestion
                          ? link_congestion_json(*congestion, st.topo.links[i])
                          : nlohmann::json{{"model", st.topo.links[i].emulated.congestion.model}};
    const auto changed = scenario.find(i);
    j["in_force_differs"] = changed != scenario.end();
    if (changed != scenario.end())
      j["scenario_emulated"] = {{"rate_bps", changed->second.rate.bps},
                                {"delay_ns", changed->second.delay.ns},
                                {"jitter_ns", changed->second.jitter.ns},
                                {"loss_pct", changed->second.loss_pct}};
    links.push_back(j);
  }
  nlohmann::json out = {{"lab", st.lab},
                        {"phase", st.phase},
                        {"scenario", st.scenario},
                        {"created_unix", st.created_unix},
                        {"backends", backends_json(st)},
                        {"live", live != nullptr},
                        {"nodes", nodes},
                        {"links", links}};
  if (!st.host.empty()) out["host"] = {{"name", st.host}, {"digest", st.digest}};
  if (congestion && congestion->source != congestion::Source::kNoAgent) {
    auto c = congestion::to_json(*congestion);
    c.erase("ports");  // per link end under links[].congestion
    c.erase("upstreams");
    out["congestion"] = c;
  }
  return out;
}

std::string labs_text(const std::vector<lab::LabSummary>& labs) {
  if (labs.empty()) return "no labs are up\n";
  std::string s;
  for (const auto& st : labs)
    s += fmt::format("{} {} {:4} nodes {:4} links  {}\n", pad(st.lab, 10), pad(st.phase, 9),
                     st.nodes, st.links, st.scenario);
  return s;
}

nlohmann::json labs_json(const std::vector<lab::LabSummary>& labs) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& st : labs)
    j.push_back({{"lab", st.lab},
                 {"phase", st.phase},
                 {"scenario", st.scenario},
                 {"nodes", st.nodes},
                 {"links", st.links}});
  return {{"labs", j}};
}

std::string labs_by_user_text(const std::vector<lab::UserLabs>& users) {
  std::string s;
  std::size_t n = 0;
  for (const auto& u : users) {
    if (!u.error.empty()) s += fmt::format("{} (uid {}): {}\n", pad(u.user, 12), u.uid, u.error);
    for (const auto& st : u.labs) {
      s += fmt::format("{} {} {} {:4} nodes {:4} links  {}\n", pad(u.user, 12), pad(st.lab, 10),
                       pad(st.phase, 9), st.nodes, st.links, st.scenario);
      ++n;
    }
  }
  if (n == 0) s += "no labs are up for any user\n";
  return s;
}

nlohmann::json labs_by_user_json(const std::vector<lab::UserLabs>& users) {
  nlohmann::json j = nlohmann::json::array(), errors = nlohmann::json::array();
  for (const auto& u : users) {
    if (!u.error.empty()) errors.push_back({{"user", u.user}, {"uid", u.uid}, {"error", u.error}});
    for (const auto& st : u.labs)
      j.push_back({{"user", u.user},
                   {"uid", u.uid},
                   {"lab", st.lab},
                   {"phase", st.phase},
                   {"scenario", st.scenario},
                   {"nodes", st.nodes},
                   {"links", st.links}});
  }
  return {{"labs", j}, {"errors", errors}};
}

}  // namespace tb::report
