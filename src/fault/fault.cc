#include "fault/fault.h"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/events.h"
#include "core/paths.h"
#include "core/process.h"
#include "fault/link_ops.h"
#include "lab/link_change.h"
#include "lab/storm.h"
#include "plan/plan.h"
#include "scenario/names.h"

namespace tb::fault {
namespace {

using scenario::FaultKind;

// Pids of this lab's tb-rank processes whose network namespace is `netns`.
std::vector<int> ranks_in(const std::string& lab, const std::string& netns) {
  struct stat want {};
  if (::stat((paths::roots().netns + "/" + netns).c_str(), &want) != 0) return {};
  std::vector<int> out;
  for (int pid : owned_processes(plan::owner_marker(lab))) {
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
    if (ec || exe.filename() != "tb-rank") continue;
    struct stat have {};
    if (::stat(("/proc/" + std::to_string(pid) + "/ns/net").c_str(), &have) != 0) continue;
    if (have.st_ino == want.st_ino && have.st_dev == want.st_dev) out.push_back(pid);
  }
  return out;
}

}  // namespace

namespace {

// This host's part of a resolved fault (a lab over several hosts): every link it acts on has an
// end here, and what the other hosts hold is said.
Result<Resolved> on_this_host(const lab::LabState& st, Resolved r) {
  if (st.host.empty()) return r;
  for (size_t i : r.links) {
    const auto& l = st.topo.links[i];
    if (auto e = require_an_end_here(st, l); !e)
      return std::unexpected(with_context(e.error(), r.label));
    if (auto note = ends_here(st, l).elsewhere(l); !note.empty())
      r.elsewhere.push_back(lab::link_key(l) + ": " + note);
  }
  return r;
}

// The ToR ports facing GPU `g` whose egress is a lossless polled queue, and their rail links.
struct StormPorts {
  std::vector<std::string> ports;
  std::vector<size_t> links;
  std::string model;  // the first rail's model when none is lossless
};
StormPorts storm_ports(const lab::LabState& st, const plan::Node& g) {
  StormPorts out;
  for (size_t i = 0; i < st.topo.links.size(); ++i) {
    const auto& l = st.topo.links[i];
    if (l.tier != plan::Tier::kScaleOut || (l.a.node != g.name && l.b.node != g.name)) continue;
    const bool gpu_is_a = l.a.node == g.name;
    const plan::LinkEnd& tor = gpu_is_a ? l.b : l.a;
    const shaping::Congestion& toward_gpu =
        gpu_is_a ? l.emulated.congestion.ba : l.emulated.congestion.ab;
    if (out.model.empty()) out.model = l.emulated.congestion.model;
    if (toward_gpu.model != "lossless" || toward_gpu.feeders == 0) continue;
    out.ports.push_back(tor.node + ":" + tor.ifname);
    out.links.push_back(i);
  }
  return out;
}

// pfc-storm on node `n`: a GPU whose rail is lossless.
Result<Resolved> resolve_storm(const lab::LabState& st, const plan::Node& n, Resolved r) {
  // What is valid: the GPUs of this lab with a lossless rail.
  auto valid = [&] {
    std::vector<std::string> v;
    for (const auto& g : st.topo.nodes)
      if (g.kind == plan::NodeKind::kGpu && !storm_ports(st, g).ports.empty()) v.push_back(g.name);
    if (v.empty())
      return std::string("lab ") + st.lab +
             " has no GPU with a lossless rail (congestion = \"lossless\", the hpn preset's "
             "default, on a shaped rail)";
    std::string s = "GPUs with a lossless rail: ";
    for (size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > 8) s += " (" + std::to_string(v.size() - 8) + " more)";
    return s;
  };
  if (n.kind != plan::NodeKind::kGpu)
    return bad_input("pfc-storm: " + n.name + " is a " + plan::to_string(n.kind) +
                     ", not a GPU; a storm comes from the NIC of a GPU (the ToR port facing it "
                     "is held paused). " +
                     valid());
  const StormPorts sp = storm_ports(st, n);
  if (sp.ports.empty())
    return bad_input("pfc-storm: the rail of " + n.name + " is not lossless (congestion = \"" +
                     (sp.model.empty() ? std::string("none") : sp.model) +
                     "\"): PFC pauses exist only on lossless rails. " + valid());
  r.ports = sp.ports;
  r.links = sp.links;
  r.label = "pfc-storm " + n.name + " (";
  for (size_t i = 0; i < sp.ports.size(); ++i) r.label += (i ? ", " : "") + sp.ports[i];
  r.label += ")";
  return on_this_host(st, r);
}

}  // namespace

Result<Resolved> resolve(const lab::LabState& st, const scenario::Fault& f) {
  Resolved r{f, {}, "", "", {}};
  const std::string kind = scenario::to_string(f.kind);
  switch (scenario::info(f.kind).target) {
    case scenario::FaultTarget::kLink: {
      std::string a = f.a, b = f.b;
      if (!f.link.empty()) {
        a += ":" + f.link;
        b += ":" + f.link;
      }
      auto idx = lab::find_link(st.topo, a, b);
      if (!idx) return std::unexpected(with_context(idx.error(), kind));
      r.links.push_back(*idx);
      r.label = kind + " " + lab::link_key(st.topo.links[*idx]);
      return on_this_host(st, r);
    }
    case scenario::FaultTarget::kRegions: {
      for (size_t i = 0; i < st.topo.links.size(); ++i) {
        const auto& l = st.topo.links[i];
        if (l.tier != plan::Tier::kWan) continue;
        const auto* na = st.topo.node(l.a.node);
        const auto* nb = st.topo.node(l.b.node);
        if ((na->region == f.region_a && nb->region == f.region_b) ||
            (na->region == f.region_b && nb->region == f.region_a))
          r.links.push_back(i);
      }
      if (r.links.empty())
        return bad_input(kind + " " + f.region_a + " " + f.region_b +
                         ": no WAN link joins these regions in lab " + st.lab);
      r.label = kind + " " + f.region_a + " | " + f.region_b;
      if (!st.host.empty()) {
        // This host's WAN links between them: those with an end here.
        std::vector<size_t> here;
        std::string hosts;
        for (size_t i : r.links) {
          const auto e = ends_here(st, st.topo.links[i]);
          if (!e.none()) {
            here.push_back(i);
          } else if (hosts.find(e.a_host) == std::string::npos) {
            hosts += (hosts.empty() ? "" : ", ") + e.a_host;
          }
        }
        if (here.empty())
          return bad_input(r.label + ": no WAN link between " + f.region_a + " and " + f.region_b +
                           " has an end on this host (host " + st.host + " of lab " + st.lab +
                           "); they are on host " + hosts + ": run it there");
        r.links = here;
      }
      return on_this_host(st, r);
    }
    case scenario::FaultTarget::kNode:
      break;
  }
  const std::string node = scenario::canonical_node(f.node);
  const plan::Node* n = st.topo.node(node);
  if (!n) return bad_input(kind + ": no node " + f.node + " in lab " + st.lab);
  if (!st.host.empty() && n->host != st.host)
    return bad_input(kind + ": node " + node + " is on host " + n->host +
                     ", not on this one (host " + st.host + " of lab " + st.lab +
                     "); run it on host " + n->host);
  if (f.kind == FaultKind::kPfcStorm) return resolve_storm(st, *n, r);
  if (f.kind == FaultKind::kRankKill) {
    if (n->kind != plan::NodeKind::kGpu)
      return bad_input("rank-kill: " + node + " is not a GPU (node-crash takes switches)");
    r.netns = n->netns;
    r.label = "rank-kill " + node;
    return r;
  }
  // node-crash
  if (n->kind == plan::NodeKind::kGpu)
    return bad_input("node-crash: " + node + " is a GPU; use rank-kill (kill) for a GPU");
  for (size_t i = 0; i < st.topo.links.size(); ++i)
    if (st.topo.links[i].a.node == node || st.topo.links[i].b.node == node) r.links.push_back(i);
  r.label = "node-crash " + node + " (" + std::to_string(r.links.size()) + " links)";
  return on_this_host(st, r);
}

std::vector<Step> schedule(const std::vector<Resolved>& faults) {
  std::vector<Step> out;
  for (size_t i = 0; i < faults.size(); ++i) {
    const auto& f = faults[i].spec;
    if (f.kind == FaultKind::kFlap) {
      const int64_t half = f.period.ns / 2;
      for (int c = 0; c < f.count; ++c) {
        const int64_t t = f.at.ns + c * f.period.ns;
        out.push_back({t, i, true, c});
        out.push_back({t + half, i, false, c});
      }
      continue;
    }
    out.push_back({f.at.ns, i, true, -1});
    if (f.duration.ns > 0 && f.kind != FaultKind::kRankKill && f.kind != FaultKind::kLinkUp)
      out.push_back({f.at.ns + f.duration.ns, i, false, -1});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Step& a, const Step& b) { return a.at_ns < b.at_ns; });
  return out;
}

Status Injector::apply(const Resolved& f, const Step& s) {
  const size_t id = s.fault;
  nlohmann::json e{{"event", s.inject ? "fault_inject" : "fault_revert"},
                   {"fault", id},
                   {"kind", scenario::to_string(f.spec.kind)},
                   {"target", f.label}};
  if (s.cycle >= 0) e["cycle"] = s.cycle;
  // Stamped when the change is in force (an nft rule takes ~20 ms to commit): detection,
  // outage and stall are measured from then. requested_ns is when the step was due to start.
  e["requested_ns"] = monotonic_ns();
  effect_ns_ = 0;
  auto r = s.inject ? inject(f, id) : revert(f, id);
  // When the first part of it was in force (the other direction's rule may follow ~20 ms later).
  last_effective_ns_ = effect_ns_ > 0 ? effect_ns_ : monotonic_ns();
  e["effective_ns"] = last_effective_ns_;
  (void)append_event(events_path(st_.lab), e);
  if (!r)
    (void)append_event(events_path(st_.lab),
                       {{"event", "fault_error"}, {"fault", id}, {"error", r.error().message}});
  return r;
}

Status Injector::inject(const Resolved& f, size_t id) {
  const FaultKind k = f.spec.kind;
  if (k == FaultKind::kRankKill) {
    const auto pids = ranks_in(st_.lab, f.netns);
    for (int pid : pids) ::kill(pid, SIGKILL);
    (void)append_event(events_path(st_.lab),
                       {{"event", "ranks_killed"}, {"netns", f.netns}, {"pids", pids}});
    return {};
  }
  if (k == FaultKind::kLinkUp) {
    for (size_t l : f.links) TB_TRY(set_link_state(st_, kernel_, l, true, &effect_ns_));
    return {};
  }
  if (std::find(active_.begin(), active_.end(), id) == active_.end()) active_.push_back(id);
  if (k == FaultKind::kPfcStorm) {
    // In force when the agent has held the ports (its answer).
    auto applied = lab::set_storms(st_.lab, f.ports, true);
    if (!applied) return std::unexpected(applied.error());
    effect_ns_ = *applied;
    return {};
  }
  if (k == FaultKind::kLinkDown || k == FaultKind::kFlap || k == FaultKind::kNodeCrash) {
    for (size_t l : f.links) TB_TRY(set_link_state(st_, kernel_, l, false, &effect_ns_));
    return {};
  }
  if (k == FaultKind::kBlackhole || k == FaultKind::kPartition) {
    for (size_t l : f.links) TB_TRY(set_blackhole(st_, l, true, &effect_ns_));
    return {};
  }
  // loss, latency: remember the figures to go back to.
  std::vector<plan::EmulatedFigures> before;
  for (size_t l : f.links) before.push_back(current_figures(st_, l));
  saved_.emplace_back(id, before);
  for (size_t i = 0; i < f.links.size(); ++i) {
    lab::FigureChange c;
    if (k == FaultKind::kLoss) c.loss_pct = f.spec.loss_pct;
    if (k == FaultKind::kLatency) c.delay = Duration{before[i].delay.ns + f.spec.delay.ns};
    TB_TRY(change_link(st_, kernel_, f.links[i], false, c));
  }
  return {};
}

Status Injector::revert(const Resolved& f, size_t id) {
  std::erase(active_, id);
  const FaultKind k = f.spec.kind;
  if (k == FaultKind::kPfcStorm) {
    auto applied = lab::set_storms(st_.lab, f.ports, false);
    if (!applied) return std::unexpected(applied.error());
    effect_ns_ = *applied;
    return {};
  }
  if (k == FaultKind::kLinkDown || k == FaultKind::kFlap || k == FaultKind::kNodeCrash) {
    for (size_t l : f.links) TB_TRY(set_link_state(st_, kernel_, l, true, &effect_ns_));
    return {};
  }
  if (k == FaultKind::kBlackhole || k == FaultKind::kPartition) {
    for (size_t l : f.links) TB_TRY(set_blackhole(st_, l, false, &effect_ns_));
    return {};
  }
  auto it =
      std::find_if(saved_.rbegin(), saved_.rend(), [&](const auto& p) { return p.first == id; });
  if (it == saved_.rend()) return {};
  for (size_t i = 0; i < f.links.size(); ++i) {
    const auto& was = it->second[i];
    lab::FigureChange c;
    c.loss_pct = was.loss_pct;
    c.delay = was.delay;
    TB_TRY(change_link(st_, kernel_, f.links[i], false, c));
  }
  saved_.erase(std::next(it).base());
  return {};
}

void Injector::revert_all(const std::vector<Resolved>& faults) {
  const auto active = active_;
  for (auto it = active.rbegin(); it != active.rend(); ++it)
    (void)apply(faults[*it], Step{0, *it, false, -1});
}

void Injector::keep_lasting(const std::vector<Resolved>& faults) {
  std::erase_if(active_, [&](size_t id) { return faults[id].spec.duration.ns == 0; });
}

}  // namespace tb::fault
