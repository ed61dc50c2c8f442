#include "experiment/probes.h"

#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/events.h"
#include "core/process.h"
#include "plan/hosts.h"
#include "plan/plan.h"
#include "probe/rtt.h"
#include "runner/supervisor.h"

namespace tb::experiment {
namespace {

const plan::Node* gpu(const lab::LabState& st, const std::string& region, int server, int index) {
  for (const auto& n : st.topo.nodes)
    if (n.kind == plan::NodeKind::kGpu && n.region == region &&
        (server < 0 || n.server == server) && (index < 0 || n.index == index))
      return &n;
  return nullptr;
}

// Another GPU of the same region on another server, preferring the same rail index.
const plan::Node* peer_on_other_server(const lab::LabState& st, const plan::Node& g) {
  const plan::Node* any = nullptr;
  for (const auto& n : st.topo.nodes)
    if (n.kind == plan::NodeKind::kGpu && n.region == g.region && n.server != g.server) {
      if (n.index == g.index) return &n;
      if (!any) any = &n;
    }
  return any;
}

std::vector<std::pair<const plan::Node*, const plan::Node*>> candidates(const lab::LabState& st,
                                                                        const fault::Resolved& f) {
  std::vector<std::pair<const plan::Node*, const plan::Node*>> out;
  auto cross_region = [&](const std::string& ra, const std::string& rb) {
    const auto* a = gpu(st, ra, 0, 0);
    const auto* b = gpu(st, rb, 0, 0);
    if (a && b) out.emplace_back(a, b);
  };
  if (f.spec.kind == scenario::FaultKind::kRankKill) return out;
  if (f.spec.kind == scenario::FaultKind::kPartition) {
    cross_region(f.spec.region_a, f.spec.region_b);
    return out;
  }
  for (size_t l : f.links) {
    const auto& link = st.topo.links[l];
    const auto* a = st.topo.node(link.a.node);
    const auto* b = st.topo.node(link.b.node);
    if (a->region != b->region) {
      cross_region(a->region, b->region);
      break;
    }
    const plan::Node* g = a->kind == plan::NodeKind::kGpu   ? a
                          : b->kind == plan::NodeKind::kGpu ? b
                                                            : nullptr;
    if (!g) {  // a switch link: a GPU on that rail (or the router's region) to another server
      const plan::Node* sw = a->kind == plan::NodeKind::kTor ? a : b;
      g = gpu(st, sw->region, -1, sw->kind == plan::NodeKind::kTor ? sw->index : -1);
      if (sw->kind == plan::NodeKind::kTransitRouter || sw->kind == plan::NodeKind::kVpc) {
        for (const auto& r : st.topo.nodes)
          if (r.kind == plan::NodeKind::kTransitRouter && r.region != sw->region) {
            cross_region(sw->region, r.region);
            break;
          }
        break;
      }
    }
    if (!g) continue;
    if (const auto* p = peer_on_other_server(st, *g)) out.emplace_back(g, p);
    break;
  }
  return out;
}

}  // namespace

std::vector<ProbePair> probe_pairs(const lab::LabState& st,
                                   const std::vector<fault::Resolved>& faults) {
  std::vector<ProbePair> out;
  const auto wan = plan::wan_adjacency(st.topo);
  for (size_t i = 0; i < faults.size(); ++i)
    for (const auto& [a, b] : candidates(st, faults[i])) {
      auto r = plan::reach(*a, *b, wan);
      if (!r) continue;
      auto it = std::find_if(out.begin(), out.end(), [&](const ProbePair& p) {
        return p.src == a->name && p.dst == b->name;
      });
      if (it == out.end()) {
        out.push_back({a->name, b->name, r->first.addr.to_string(), {}, 0});
        it = std::prev(out.end());
      }
      it->faults.push_back(i);
    }
  for (size_t i = 0; i < out.size(); ++i) out[i].port = static_cast<uint16_t>(7100 + i);
  return out;
}

namespace {
// Whether `node` is on this host (a lab on one host: always).
bool here(const lab::LabState& st, const std::string& node) {
  const plan::Node* n = st.topo.node(node);
  return st.host.empty() || (n && n->host == st.host);
}
}  // namespace

Status ProbeSet::start(const lab::LabState& st, std::vector<ProbePair>& pairs,
                       const std::string& dir, const std::string& tb_probe, int interval_us,
                       int64_t length_ns, const std::string& name, int wait_ms) {
  TB_TRY(start_servers(st, pairs, dir, tb_probe, length_ns, name));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // servers bound
  return start_clients(st, pairs, dir, tb_probe, interval_us, length_ns, name, wait_ms);
}

Status ProbeSet::start_servers(const lab::LabState& st, std::vector<ProbePair>& pairs,
                               const std::string& dir, const std::string& tb_probe,
                               int64_t length_ns, const std::string& name) {
  const std::string owner = plan::owner_marker(st.lab);
  const int64_t seconds = length_ns / 1'000'000'000 + 1;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& p = pairs[i];
    if (!here(st, p.dst)) continue;
    std::vector<std::string> argv = {tb_probe,    "serve",
                                     "--port",    std::to_string(p.port),
                                     "--seconds", std::to_string(seconds + 15)};
    if (p.dscp) argv.insert(argv.end(), {"--dscp", std::to_string(p.dscp)});
    auto srv =
        runner::spawn_in_netns(st.topo.node(p.dst)->netns, argv, owner,
                               dir + "/logs/" + name + "-serve-" + std::to_string(i) + ".log");
    if (!srv) return std::unexpected(srv.error());
    servers_.push_back(*srv);
  }
  return {};
}

Status ProbeSet::start_clients(const lab::LabState& st, std::vector<ProbePair>& pairs,
                               const std::string& dir, const std::string& tb_probe, int interval_us,
                               int64_t length_ns, const std::string& name, int wait_ms) {
  const std::string owner = plan::owner_marker(st.lab);
  deadline_ns_ = monotonic_ns() + length_ns + int64_t{wait_ms} * 1'000'000 + 4'500'000'000;
  client_logs_.assign(pairs.size(), "");
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& p = pairs[i];
    if (!here(st, p.src)) continue;
    const int64_t count = length_ns / (int64_t{interval_us} * 1000) + 1;
    const std::string log = dir + "/logs/" + name + "-" + std::to_string(i) + ".json";
    std::error_code ec;
    std::filesystem::remove(log, ec);
    std::vector<std::string> argv = {
        tb_probe,        "rtt",
        "--to",          p.dst_addr,
        "--port",        std::to_string(p.port),
        "--count",       std::to_string(std::min<int64_t>(count, probe::kMaxProbeCount)),
        "--interval-us", std::to_string(interval_us),
        "--wait-ms",     std::to_string(wait_ms),
        "--samples"};
    if (p.dscp) argv.insert(argv.end(), {"--dscp", std::to_string(p.dscp)});
    auto cli = runner::spawn_in_netns(st.topo.node(p.src)->netns, argv, owner, log);
    if (!cli) return std::unexpected(cli.error());
    clients_.push_back(*cli);
    client_logs_[i] = log;
  }
  return {};
}

std::optional<probe::RttResult> parse_rtt_log(const std::string& text) {
  std::optional<probe::RttResult> result;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || j.value("mode", "") != "rtt") continue;
    auto r = probe::rtt_from_json(j);
    if (!r) continue;
    result = std::move(*r);
  }
  return result;
}

std::vector<std::vector<metrics::Interval>> ProbeSet::finish(std::vector<std::string>* errors,
                                                             bool now) {
  // The clients stop by count; give them until the deadline, then end them all.
  while (!now && monotonic_ns() < deadline_ns_) {
    bool running = false;
    for (int& pid : clients_)
      if (pid > 0) {
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) == pid)
          pid = -pid;
        else
          running = true;
      }
    if (!running) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<int> left;
  for (int pid : clients_)
    if (pid > 0) left.push_back(pid);
  for (int pid : servers_) left.push_back(pid);
  terminate(left, 1000);
  servers_.clear();
  std::vector<std::vector<metrics::Interval>> out;
  results_.clear();
  for (const auto& log : client_logs_) {
    std::vector<metrics::Interval> o;
    std::optional<probe::RttResult> result;
    if (!log.empty()) {
      std::ifstream in(log);
      std::stringstream text;
      text << in.rdbuf();
      result = parse_rtt_log(text.str());
      if (!result) errors->push_back("probe " + log + " printed no result");
      if (result)
        for (auto [a, b] : result->outages_ns) o.push_back({a, b});
    }
    out.push_back(std::move(o));
    results_.push_back(std::move(result));
  }
  clients_.clear();
  return out;
}

ProbeSet::~ProbeSet() {
  std::vector<int> left;
  for (int pid : clients_)
    if (pid > 0) left.push_back(pid);
  for (int pid : servers_) left.push_back(pid);
  if (!left.empty()) terminate(left, 1000);
}

}  // namespace tb::experiment
