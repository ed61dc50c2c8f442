#include "launch/place.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "plan/hosts.h"
#include "scenario/names.h"

namespace tb::launch {

std::string addr_of(const plan::Node& n, const std::string& role) {
  auto p = plan::address_of(n, role);
  return p ? p->addr.to_string() : "";
}

using workload::Job;

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ','))
    if (!part.empty()) out.push_back(part);
  return out;
}

bool matches(const plan::Node& g, const std::string& sel) {
  if (sel == "all") return true;
  if (sel == g.name) return true;
  if (sel == g.region) return true;
  return sel == scenario::server_node(g.region, g.server);
}

}  // namespace

Result<std::vector<const plan::Node*>> select_ranks(const plan::Topology& topo,
                                                    const std::string& selectors) {
  std::vector<const plan::Node*> gpus;
  for (const auto& n : topo.nodes)
    if (n.kind == plan::NodeKind::kGpu) gpus.push_back(&n);
  const auto sels = split_commas(selectors.empty() ? "all" : selectors);
  if (sels.empty()) return bad_input("--ranks: empty selector");
  std::vector<const plan::Node*> out;
  for (const auto& raw : sels) {
    const std::string sel = raw == "all" ? raw : scenario::canonical_node(raw);
    bool any = false;
    for (const auto* g : gpus)
      if (matches(*g, sel)) {
        any = true;
        if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
      }
    if (!any)
      return bad_input("--ranks: '" + raw + "' matches no GPU of this lab; use \"all\", a " +
                       "region (\"" + gpus.front()->region + "\"), a server (\"" +
                       scenario::server_node(gpus.front()->region, gpus.front()->server) +
                       "\") or a GPU (\"" + gpus.front()->name + "\"), several joined by ','");
  }
  // Topology order (region, server, GPU), whatever order the selectors came in.
  std::vector<const plan::Node*> ordered;
  for (const auto* g : gpus)
    if (std::find(out.begin(), out.end(), g) != out.end()) ordered.push_back(g);
  return ordered;
}

Status place_ranks(Job& job, const plan::Topology& topo, const std::vector<const plan::Node*>& gpus,
                   bool frontend) {
  const auto wan = plan::wan_adjacency(topo);
  bool one_region = true;
  for (const auto* g : gpus) one_region = one_region && g->region == gpus.front()->region;
  std::map<std::pair<std::string, int>, int> server_ids;
  job.ranks.clear();
  job.peers.assign(gpus.size(), std::vector<collective::TcpPeer>(gpus.size()));
  for (size_t i = 0; i < gpus.size(); ++i) {
    const auto& g = *gpus[i];
    const auto key = std::pair{g.region, g.server};
    const int sid = server_ids.try_emplace(key, static_cast<int>(server_ids.size())).first->second;
    const std::string gloo =
        addr_of(g, !frontend && one_region && !addr_of(g, "rail").empty() ? "rail" : "nvl");
    job.ranks.push_back({g.name, g.netns, sid, gloo});
    for (size_t j = 0; j < gpus.size(); ++j) {
      if (i == j) continue;
      const auto& t = *gpus[j];
      auto r = plan::reach(g, t, wan);
      if (!r)
        return bad_input("--ranks: " + g.name + " cannot reach " + t.name +
                         " in this lab (no path between their regions)");
      const std::string label = r->second;
      const std::string tier = label == std::string("nvl") && g.region != t.region
                                   ? "wan"
                                   : (g.region == t.region && g.server == t.server ? "nvl" : label);
      if (frontend && tier == "rail") {
        const std::string dst = addr_of(t, "nvl"), src = addr_of(g, "nvl");
        if (dst.empty() || src.empty())
          return bad_input("--tier frontend: " + (src.empty() ? g.name : t.name) +
                           " has no NVLink-side address to reach the frontend from; use --tier "
                           "auto");
        job.peers[i][j] = {dst, src, "frontend"};
        continue;
      }
      const std::string src_role = label == std::string("rail") ? "rail" : "nvl";
      job.peers[i][j] = {r->first.addr.to_string(), addr_of(g, src_role), tier};
    }
  }
  return {};
}

namespace {

// A GPU's rail ports: (ToR, this GPU's interface), sorted by ToR.
std::vector<std::pair<std::string, std::string>> rail_ports(const plan::Topology& topo,
                                                            const std::string& gpu) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& l : topo.links) {
    if (l.tier != plan::Tier::kScaleOut) continue;
    if (l.a.node == gpu) out.emplace_back(l.b.node, l.a.ifname);
    if (l.b.node == gpu) out.emplace_back(l.a.node, l.b.ifname);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int bind_ports(Job& job, const plan::Topology& topo, const std::vector<const plan::Node*>& gpus) {
  int bound = 0;
  for (size_t i = 0; i < gpus.size() && i < job.peers.size(); ++i) {
    const auto mine = rail_ports(topo, gpus[i]->name);
    for (size_t j = 0; j < gpus.size() && j < job.peers[i].size(); ++j) {
      auto& p = job.peers[i][j];
      p.ports.clear();
      if (i == j || p.tier != "rail" || mine.size() < 2) continue;
      // Same ToRs, same interface names on both ends: a segment that leaves by port k arrives
      // on the peer's port k.
      if (rail_ports(topo, gpus[j]->name) != mine) continue;
      for (const auto& [tor, ifname] : mine) p.ports.push_back(ifname);
      ++bound;
    }
  }
  return bound;
}

void mark_rdma_pairs(Job& job, const std::vector<apply::RxeDevice>& rxe) {
  const size_t n = job.ranks.size();
  TB_CHECK(job.peers.size() == n);
  job.rdma.assign(n, std::vector<char>(n, 0));
  job.rdma_fallback.clear();
  if (job.transport.kind != workload::Transport::kRdma) return;
  std::vector<bool> has(n, false);
  for (size_t i = 0; i < n; ++i)
    for (const auto& d : rxe) has[i] = has[i] || d.netns == job.ranks[i].netns;
  // Both ends must agree, or one would wait for RDMA while the other dials TCP.
  auto rail = [&](size_t i, size_t j) {
    return job.peers[i][j].tier == "rail" && job.peers[j][i].tier == "rail";
  };
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j)
      job.rdma[i][j] = job.rdma[j][i] = rail(i, j) && has[i] && has[j] ? 1 : 0;
  for (size_t i = 0; i < n; ++i) {
    int rail_pairs = 0;
    for (size_t j = 0; j < n; ++j) rail_pairs += i != j && rail(i, j) ? 1 : 0;
    if (rail_pairs > 0 && !has[i])
      job.rdma_fallback.push_back("rank " + std::to_string(i) + " (" + job.ranks[i].node +
                                  "): no rxe device in " + job.ranks[i].netns + ", so its " +
                                  std::to_string(rail_pairs) + " rail pair(s) use TCP");
  }
}

Status route_over_frontend(Job& job, const std::vector<const plan::Node*>& gpus) {
  for (size_t i = 0; i < gpus.size() && i < job.ranks.size(); ++i)
    for (size_t j = 0; j < gpus.size() && j < job.ranks.size(); ++j) {
      if (i == j || job.ranks[i].server == job.ranks[j].server) continue;
      const std::string src = addr_of(*gpus[i], "nvl"), dst = addr_of(*gpus[j], "nvl");
      if (src.empty() || dst.empty())
        return bad_input("tier frontend: " + (src.empty() ? gpus[i] : gpus[j])->name +
                         " has no NVLink-side address to reach the frontend from");
      job.peers[i][j] = {dst, src, "frontend"};
    }
  return {};
}

}  // namespace tb::launch
