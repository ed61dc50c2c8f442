#include "exercise/check.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "collective/types.h"
#include "congestion/counters.h"
#include "experiment/experiment.h"
#include "experiment/probes.h"
#include "experiment/train_sweep.h"
#include "lab/daemons.h"
#include "lab/state.h"
#include "lab/watch.h"
#include "launch/bench_run.h"
#include "launch/place.h"
#include "plan/hosts.h"
#include "scenario/loader.h"
#include "scenario/names.h"
#include "scenario/reader.h"
#include "verify/result.h"

namespace tb::exercise {
namespace {

// Linux TCP's minimum retransmission timeout (TCP_RTO_MIN).
constexpr double kRtoMinMs = 200;

std::vector<std::string> stage_files(const lab::LabState& st) {
  std::vector<std::string> out;
  for (const auto& s : st.stages) out.push_back(lab::stage_stats_path(st.lab, s.netns));
  return out;
}

const scenario::Workload* find_workload(const scenario::Scenario& s, const std::string& name) {
  for (const auto& w : s.workloads)
    if (w.name == name) return &w;
  return nullptr;
}

std::string mbit(double bps) {
  return fmt::format("{:.1f} Mbit/s", bps / 1e6);
}

// The lowest emulated rate of a link of `tier` that touches one of `nodes`.
double lowest_rate(const plan::Topology& topo, plan::Tier tier,
                   const std::vector<std::string>& nodes) {
  double best = 0;
  for (const auto& l : topo.links) {
    if (l.tier != tier) continue;
    const bool touches = std::find(nodes.begin(), nodes.end(), l.a.node) != nodes.end() ||
                         std::find(nodes.begin(), nodes.end(), l.b.node) != nodes.end();
    if (!touches || l.emulated.rate.bps <= 0) continue;
    if (best == 0 || l.emulated.rate.bps < best) best = l.emulated.rate.bps;
  }
  return best;
}

// A NIC's rail ports: the fewest scale-out links of any of `gpus` and, over those links, the
// lowest emulated rate and the lowest sum per GPU (the NIC's rate, "of = nic").
struct NicPorts {
  int ports = 0;
  double port_bps = 0, nic_bps = 0;
};

NicPorts nic_ports(const plan::Topology& topo, const std::vector<std::string>& gpus) {
  NicPorts n;
  bool first = true;
  for (const auto& g : gpus) {
    int ports = 0;
    double sum = 0;
    for (const auto& l : topo.links) {
      if (l.tier != plan::Tier::kScaleOut || (l.a.node != g && l.b.node != g)) continue;
      ++ports;
      sum += l.emulated.rate.bps;
      if (n.port_bps == 0 || (l.emulated.rate.bps > 0 && l.emulated.rate.bps < n.port_bps))
        n.port_bps = l.emulated.rate.bps;
    }
    if (first || ports < n.ports) n.ports = ports;
    if (first || sum < n.nic_bps) n.nic_bps = sum;
    first = false;
  }
  return n;
}

// A ToR's uplinks count for the ECMP target once it sent this much over them (TCP's ACKs and
// control traffic are no flows to hash; `train` prints a ToR's ECMP line from 1 MiB too).
constexpr uint64_t kEcmpMinBytes = 1 << 20;

// The aggregation tier's ECMP groups over the window since the watcher's previous sample: every
// link's bytes from its a end's counters (lab/watch.h), grouped by experiment::ecmp_groups.
Result<std::vector<experiment::EcmpGroup>> uplink_groups(const lab::LabState& st,
                                                         lab::Watcher& watcher) {
  auto f = watcher.sample();
  if (!f) return std::unexpected(f.error());
  std::vector<experiment::LinkBytes> links(st.topo.links.size());
  for (size_t i = 0; i < links.size(); ++i) {
    const auto& l = st.topo.links[i];
    links[i].a = l.a.node + ":" + l.a.ifname;
    links[i].b = l.b.node + ":" + l.b.ifname;
    links[i].tier = plan::to_string(l.tier);
    links[i].emulated_bps = l.emulated.rate.bps;
  }
  for (const auto& l : f->links) {
    if (l.link >= links.size()) continue;
    links[l.link].ab = static_cast<uint64_t>(l.ab_bps * f->interval_s / 8 + 0.5);
    links[l.link].ba = static_cast<uint64_t>(l.ba_bps * f->interval_s / 8 + 0.5);
  }
  return experiment::ecmp_groups(links);
}

Status workload_missing(const std::string& copy, const std::string& name) {
  return bad_input(copy + ": workload \"" + name +
                   "\": missing; the checker measures this [[workload]] (its ranks, tier and "
                   "channels): put it back (`exercise reset` restores the starting file)");
}

const char* verdict_word(Verdict v) {
  return v == Verdict::kPass ? "PASS" : v == Verdict::kFail ? "FAIL" : "NOT JUDGED";
}

// check.toml's max_control_p99_ms (exercise 8): while the bench runs, a control probe from each
// of the job's servers to its region's transit router at the router's frontend address (UDP
// request/response, tb-probe rtt against tb-probe serve, one every kControlIntervalUs for
// kControlWindowNs from just before the bench) — the VPC's own traffic (heartbeats, the data
// loader), which PFC backpressure on the VPC holds up behind the collective's paused backlog.
constexpr int kControlIntervalUs = 20'000;
constexpr int64_t kControlWindowNs = 4'000'000'000;
constexpr uint16_t kControlPort = 7400;  // run's probes use 7100-7300 + i

struct ControlProbe {
  experiment::ProbeSet probes;
  std::vector<experiment::ProbePair> pairs;
  std::string router;
  congestion::Counters before;
};

Result<std::unique_ptr<ControlProbe>> start_control(const lab::LabState& st,
                                                    const std::vector<std::string>& servers,
                                                    const std::string& tb_probe) {
  auto cp = std::make_unique<ControlProbe>();
  for (const auto& sv : servers) {
    const auto* node = st.topo.node(sv);
    if (!node) continue;
    const plan::Node* tr = nullptr;
    for (const auto& n : st.topo.nodes)
      if (n.kind == plan::NodeKind::kTransitRouter && n.region == node->region) tr = &n;
    if (!tr) continue;
    std::string addr;
    for (const auto& [role, a] : tr->addrs)
      if (role == "fe") addr = a.addr.to_string();
    if (addr.empty()) continue;
    if (std::ranges::any_of(cp->pairs, [&](const auto& p) { return p.src == sv; })) continue;
    cp->router = tr->name;
    cp->pairs.push_back(
        {sv, tr->name, addr, {}, static_cast<uint16_t>(kControlPort + cp->pairs.size()), 0});
  }
  if (cp->pairs.empty())
    return fail("check: max_control_p99_ms: the job's servers in lab " + st.lab +
                " have no transit router with a frontend address to probe");
  const std::string dir = lab::lab_dir(st.lab) + "/exercise-control";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir + "/logs", ec);
  cp->before = congestion::read_counters(lab::lab_dir(st.lab));
  TB_TRY(cp->probes.start(st, cp->pairs, dir, tb_probe, kControlIntervalUs, kControlWindowNs,
                          "control", 1000));
  return cp;
}

// One bench reading. `*unexplained` is set when busbw missed and nothing in the lab explains it
// (the host may: bench_readings measures again).
Result<CheckReport> measure_bench(const Exercise& ex, const lab::LabState& st,
                                  const scenario::Scenario& s, const CheckTools& tools,
                                  CheckReport rep, bool* unexplained) {
  const CheckSpec& c = ex.check;
  const auto* w = find_workload(s, c.workload);
  if (!w) {
    auto e = workload_missing(rep.scenario_copy, c.workload);
    return std::unexpected(e.error());
  }
  launch::BenchOptions o;
  o.ranks = w->ranks;
  o.transport.channels = w->channels;
  o.transport.spread_ports = c.spread_ports;
  o.spec.coll = *collective::parse_coll(c.op);
  if (w->kind == "collective" && !w->algo.empty()) o.spec.algo = collective::parse_algo(w->algo);
  o.spec.min_bytes = o.spec.max_bytes = c.bytes;
  o.spec.iters = c.iters;
  o.spec.warmup = c.warmup;
  o.spec.check = 1;
  o.spec.in_place = false;
  o.tb_rank = tools.tb_rank;
  TB_TRY(launch::check_options(o));
  auto job = launch::prepare_job(st, o);
  if (!job) return std::unexpected(job.error());
  auto gpus = launch::select_ranks(st.topo, o.ranks);
  if (!gpus) return std::unexpected(gpus.error());
  const bool frontend = w->tier == "frontend";
  if (frontend) TB_TRY(launch::route_over_frontend(*job, *gpus));

  // The target: the lowest emulated rate of the ranks' links of the target tier.
  std::vector<std::string> ranks, servers;
  for (const auto* g : *gpus) {
    ranks.push_back(g->name);
    servers.push_back(scenario::server_node(g->region, g->server));
  }
  const NicPorts nic = nic_ports(st.topo, ranks);
  const double rate = c.of_tier == "nic"    ? nic.nic_bps
                      : c.of_tier == "rail" ? lowest_rate(st.topo, plan::Tier::kScaleOut, ranks)
                                            : lowest_rate(st.topo, plan::Tier::kFrontend, servers);
  if (rate <= 0)
    return bad_input(ex.dir + "/check.toml: target: of = \"" + c.of_tier + "\": the ranks of " +
                     "workload \"" + c.workload + "\" have no shaped " + c.of_tier +
                     " link in lab " + st.lab + " to take the rate from");
  // What the pairs across servers actually cross, and that tier's ceiling.
  std::string crossed = "";
  for (size_t i = 0; i < job->peers.size(); ++i)
    for (size_t j = 0; j < job->peers[i].size(); ++j)
      if (i != j && job->ranks[i].server != job->ranks[j].server) crossed = job->peers[i][j].tier;
  double ceiling = 0;
  if (crossed == "frontend") ceiling = lowest_rate(st.topo, plan::Tier::kFrontend, servers);
  // Over the rail, a pair's connections share the NIC's ports: bound in turn (ports =
  // "spread"), the busiest port carries ceil(channels / ports) of the equal stripes; unbound,
  // the region's hash decides (l3: every connection of a pair on one port; l4: at best spread).
  std::string port_note;
  double per_link = ceiling;
  if (crossed == "rail") {
    ceiling = per_link = nic.port_bps;
    const int n = w->channels, p = std::max(1, nic.ports);
    bool l3 = true;
    for (const auto& r : s.regions) l3 = l3 && r.ecmp_hash == "l3";
    if (p > 1 && c.spread_ports) {
      const int busiest = (n + p - 1) / p;
      ceiling = nic.port_bps * n / busiest;
      port_note = fmt::format(
          "; {} channel(s) bound to the NIC's {} ports in turn: the busiest port carries {} of "
          "them, so at most {} ({} x a port's {})",
          n, p, busiest, mbit(ceiling), fmt::format("{:.2g}", 1.0 * n / busiest),
          mbit(nic.port_bps));
    } else if (p > 1 && l3) {
      port_note = fmt::format(
          "; ecmp_hash l3 puts every connection of a pair on the same one of the NIC's {} "
          "ports, so at most one port's {}",
          p, mbit(nic.port_bps));
    } else if (p > 1) {
      ceiling = nic.port_bps * std::min(n, p);
      port_note = fmt::format(
          "; ecmp_hash l4 hashes each of the {} connection(s) onto one of the NIC's {} ports "
          "at random",
          n, p);
    }
  }

  // Without min_busbw_fraction (exercise 8 judges the control probe alone) busbw is shown only.
  const bool judge_busbw = c.min_busbw_fraction.has_value();
  const double target_bps = judge_busbw ? *c.min_busbw_fraction * rate : 0;
  // The links' counters before and after the bench (max_ecmp_share).
  std::optional<lab::Watcher> watcher;
  if (c.max_ecmp_share) {
    auto wt = lab::Watcher::open(st.lab);
    if (!wt) return std::unexpected(wt.error());
    watcher.emplace(std::move(*wt));
    if (auto f = watcher->sample(); !f) return std::unexpected(f.error());
  }
  std::unique_ptr<ControlProbe> control;
  if (c.max_control_p99_ms) {
    auto cp = start_control(st, servers, tools.tb_probe);
    if (!cp) return std::unexpected(cp.error());
    control = std::move(*cp);
  }
  auto before = verify::sample_host(stage_files(st));
  std::atomic<bool> stop{false};
  std::optional<verify::PromptnessWatch> watch;
  watch.emplace();
  auto res = launch::run_job(*job, st, o, nullptr, nullptr, stop);
  const verify::Promptness prompt = watch->stop();
  auto after = verify::sample_host(stage_files(st));
  if (!res) return std::unexpected(res.error());
  rep.host = verify::host_load(before, after);
  // A stall (wake-ups >= 1 ms late for verify's share of the bench) blames the host as verify
  // does: a hypervisor's pause does not show in the CPUs' busy share.
  rep.host.promptness = prompt;
  if (prompt.stalled_share >= verify::kPromptStallShare) rep.host.host_bound = true;
  rep.results_dir = res->results_dir;
  if (!res->ok() || res->rows.empty()) {
    std::string why = res->errors.empty() ? "no size finished" : res->errors.front();
    return fail("check: the bench on lab " + st.lab + " did not finish: " + why + " (logs in " +
                res->results_dir + "/logs)");
  }
  const double busbw_bps = res->rows.front().busbw_gbps * 8e9;
  CheckValue v;
  v.name = "busbw";
  v.measured = busbw_bps / 1e6;
  v.target = target_bps / 1e6;
  v.unit = "Mbit/s";
  v.ok = busbw_bps >= target_bps;
  if (judge_busbw) {
    v.how = c.of_tier == "nic"
                ? fmt::format("{} x the NIC's rate: a GPU's {} rail port(s) together ({})",
                              *c.min_busbw_fraction, nic.ports, mbit(rate))
                : fmt::format("{} x the lowest emulated {} rate of the ranks' links ({})",
                              *c.min_busbw_fraction, c.of_tier, mbit(rate));
    rep.values.push_back(v);
  }

  // The control probe: its p99 with lost probes counted, and what the congestion agent counted
  // over the same time (pauses of the servers' frontend queues explain a miss).
  bool control_ok = true, control_explained = false;
  std::string control_note;
  if (control) {
    std::vector<std::string> errors;
    (void)control->probes.finish(&errors);
    const auto window =
        congestion::delta(control->before, congestion::read_counters(lab::lab_dir(st.lab)));
    std::vector<double> rtts;
    int sent = 0, lost = 0;
    for (const auto& r : control->probes.results()) {
      if (!r) continue;
      sent += r->sent;
      lost += r->sent - r->received;
      for (double us : r->rtt_us) rtts.push_back(us / 1000);
    }
    const auto p99 = experiment::percentile_with_lost(rtts, lost, 0.99);
    CheckValue cv;
    cv.name = "control p99";
    cv.measured = p99;
    cv.target = *c.max_control_p99_ms;
    cv.at_least = false;
    cv.unit = "ms";
    cv.ok = sent > 0 && p99 && *p99 <= *c.max_control_p99_ms;
    cv.how = fmt::format(
        "UDP request/response every {} ms from each of the job's {} server(s) to {} at its "
        "frontend address, over the VPC, for {:.0f} s from the bench's start (tb-probe rtt); "
        "p99 with lost probes counted as slower than any answered",
        kControlIntervalUs / 1000, control->pairs.size(), control->router, kControlWindowNs / 1e9);
    rep.values.push_back(cv);
    control_ok = cv.ok;
    // Pauses of the servers' frontend queues (and the router's toward the VPC): the VPC's
    // switch ports asked for them.
    uint64_t fe_pauses = 0;
    int64_t fe_paused_ns = 0;
    for (const auto& [name, u] : window.upstreams)
      if (name.ends_with(":fe") || name.ends_with(":vpc")) {
        fe_pauses += u.pauses_received;
        fe_paused_ns += u.paused_ns;
      }
    control_explained = fe_pauses > 0;
    control_note = fmt::format(
        "; control probes: {} sent, {} lost, p99 {} (needs <= {} ms)", sent, lost,
        p99 ? fmt::format("{:.1f} ms", *p99) : std::string("a lost probe"), *c.max_control_p99_ms);
    if (window.has_counts())
      control_note += fmt::format(
          "; over the bench the VPC's ports paused the frontend queues {} time(s), {:.2f} s in "
          "all (congestion agent: {})",
          fe_pauses, fe_paused_ns / 1e9, congestion::summary_line(window));
    if (!errors.empty()) control_note += "; probe errors: " + errors.front();
  }
  rep.method = fmt::format(
      "bench {} of {} bytes over the {} rank(s) of workload \"{}\" ({}), {} timed iteration(s) "
      "after {} warm-up, native tcp, {} connection(s) per peer{}, pairs on two servers over the "
      "{}; busbw = algbw x nccl-tests' bus factor; shaping {}",
      c.op, c.bytes, job->ranks.size(), c.workload, w->ranks, c.iters, c.warmup, w->channels,
      c.spread_ports ? " bound to the NIC's ports in turn (bench --ports spread)" : "",
      crossed.empty() ? "(none: one server)" : crossed, st.shaping.empty() ? "none" : st.shaping);
  const double frac = busbw_bps / rate;

  // ECMP (max_ecmp_share): each ToR that sent at least kEcmpMinBytes over its uplinks, its
  // busiest uplink's share of them (experiment::ecmp_groups, as `train` reports them).
  bool ecmp_ok = true;
  std::string ecmp_note;
  if (c.max_ecmp_share) {
    const auto groups = uplink_groups(st, *watcher);
    if (!groups) return std::unexpected(groups.error());
    int judged = 0;
    for (const auto& g : *groups) {
      if (g.total < kEcmpMinBytes) continue;
      ++judged;
      CheckValue e;
      e.name = g.node + " busiest uplink share";
      e.measured = 100 * g.max_share;
      e.target = 100 * *c.max_ecmp_share;
      e.at_least = false;
      e.unit = "% of its bytes up";
      e.ok = g.max_share <= *c.max_ecmp_share;
      e.how = fmt::format(
          "the busiest of {}'s {} uplinks, its share of the {:.1f} MiB the ToR sent up (interface "
          "counters over the bench; an even share is {:.2f})",
          g.node, g.links.size(), g.total / 1048576.0, 1.0 / g.links.size());
      ecmp_ok = ecmp_ok && e.ok;
      rep.values.push_back(e);
      std::string shares;
      double up_bps = 0;
      for (size_t k = 0; k < g.links.size(); ++k) {
        shares += fmt::format("{}{} {:.0f}%", k ? ", " : "", g.links[k].substr(g.node.size() + 1),
                              100.0 * g.bytes[k] / g.total);
      }
      for (const auto& l : st.topo.links)
        if (l.tier == plan::Tier::kAggregation && l.a.node == g.node)
          up_bps = up_bps == 0 ? l.emulated.rate.bps : std::min(up_bps, l.emulated.rate.bps);
      ecmp_note += fmt::format("; {} sent {:.1f} MiB up: {} (busiest {:.2f}x an even share)",
                               g.node, g.total / 1048576.0, shares, g.max_share * g.links.size());
      // The busiest uplink carries max_share of the bytes at its rate: that caps the pair.
      if (up_bps > 0 && g.max_share > 0)
        ceiling = ceiling > 0 ? std::min(ceiling, up_bps / g.max_share) : up_bps / g.max_share;
    }
    if (judged == 0) {
      ecmp_ok = false;
      ecmp_note = fmt::format(
          "; no ToR sent {} MiB over its uplinks: the job's traffic did not cross the spines, "
          "whose balance this exercise measures (keep the job's ranks: `exercise reset` restores "
          "them)",
          kEcmpMinBytes >> 20);
    }
  }

  if (v.ok && ecmp_ok && control_ok) {
    rep.verdict = Verdict::kPass;
    rep.diagnosis = fmt::format("busbw {} is {:.2f} of the {} rate {}", mbit(busbw_bps), frac,
                                c.of_tier, mbit(rate)) +
                    ecmp_note + control_note;
    return rep;
  }
  rep.verdict = Verdict::kFail;
  if (!v.ok || !control) {
    rep.diagnosis =
        fmt::format("busbw {} is {:.2f} of the {} rate {} (needs {:.2f})", mbit(busbw_bps), frac,
                    c.of_tier, mbit(rate), judge_busbw ? *c.min_busbw_fraction : 0.0);
  } else {
    rep.diagnosis = fmt::format("busbw {} ({:.2f} of the {} rate {})", mbit(busbw_bps), frac,
                                c.of_tier, mbit(rate));
  }
  rep.diagnosis += control_note;
  if (v.ok && ecmp_ok && !control_ok) {
    if (control_explained) {
      rep.diagnosis +=
          ": the collective's traffic shares the VPC with its control traffic, and PFC "
          "backpressure from the VPC's congested ports holds the control probes behind the "
          "paused backlog";
      return rep;
    }
    if (unexplained) *unexplained = true;
    if (rep.host.host_bound) {
      rep.verdict = Verdict::kNotJudged;
      rep.diagnosis += "; nothing in the lab paused the frontend, and the host was busy (" +
                       rep.host.text() + "): not judged, check again when it is quieter";
    }
    return rep;
  }
  if (!crossed.empty())
    rep.diagnosis += fmt::format(
        "; the pairs on two servers crossed the {} ({} per link{})", crossed, mbit(per_link),
        w->channels == 1 ? ", 1 connection per peer"
                         : fmt::format(", {} connections per peer", w->channels));
  rep.diagnosis += port_note + ecmp_note;
  if (!ecmp_ok) {
    rep.diagnosis += fmt::format(
        "; the uplinks are not balanced within {:.2f} of a ToR's bytes on one (measured from "
        "the interface counters: the hash, not the host)",
        *c.max_ecmp_share);
    return rep;
  }
  // The lab explains the miss when the path the pairs took cannot carry the target.
  const bool explained = ceiling > 0 && ceiling < target_bps;
  if (explained)
    rep.diagnosis +=
        fmt::format(", which cannot carry the target {} whatever the host does", mbit(target_bps));
  if (unexplained) *unexplained = !explained;
  if (rep.host.host_bound && !explained) {
    rep.verdict = Verdict::kNotJudged;
    rep.diagnosis += "; but the host was busy (" + rep.host.text() +
                     "), so the miss may be the host's: not judged, check again when it is quieter";
  }
  return rep;
}

}  // namespace

bool bench_again(int reading, Verdict v, bool unexplained, bool host_bound) {
  return v != Verdict::kPass && unexplained && (reading == 1 || host_bound) &&
         reading < verify::kMaxReadings;
}

namespace {

// A bench judged as verify judges a class (verify/result.h, measure_again): a miss nothing in
// the lab explains is measured again once whatever the host showed (a check's bench lasts a few
// hundred ms: a stall of tens of ms inside it costs a tenth of busbw without showing in the
// CPUs' share; once, in CI, 2 MiB at 400 Mbit/s read 0.86 of the rail with the CPUs 78% busy,
// where 14 readings here, idle and under a CPU hog on both cores, read 0.96-0.98), and again
// while the host was bound in the newest, up to verify::kMaxReadings; the newest is judged, its
// diagnosis led by the earlier readings. A miss the lab explains (the wrong tier, an unbalanced
// hash) is not measured again.
Result<CheckReport> bench_readings(const Exercise& ex, const lab::LabState& st,
                                   const scenario::Scenario& s, const CheckTools& tools,
                                   const CheckReport& rep) {
  std::string earlier;
  for (int i = 1;; ++i) {
    bool unexplained = false;
    auto r = measure_bench(ex, st, s, tools, rep, &unexplained);
    if (!r) return r;
    if (!bench_again(i, r->verdict, unexplained, r->host.host_bound)) {
      if (!earlier.empty())
        r->diagnosis = "reading " + std::to_string(i) + " of " + std::to_string(i) +
                       ", judged (earlier: " + earlier + "): " + r->diagnosis;
      return r;
    }
    std::string busbw = "no busbw";
    for (const auto& v : r->values)
      if (v.name == "busbw" && v.measured) busbw = fmt::format("{:.1f} Mbit/s", *v.measured);
    earlier += fmt::format("{}reading {} {} {}{}", earlier.empty() ? "" : "; ", i,
                           verdict_word(r->verdict), busbw,
                           r->host.host_bound ? " (host-bound: " + r->host.text() + ")" : "");
  }
}

// check.toml's `rounds`: the bench again with new connections (new source ports: a new draw of
// an l4 hash) until a verdict has a majority of the rounds, or none can. The report is that of
// the last round with the majority's verdict (its values, results and host), its diagnosis led by
// every round's verdict and busbw. Without a majority (a round not judged among split ones) it
// is not judged, with the last not-judged round's report.
Result<CheckReport> measure_bench_rounds(const Exercise& ex, const lab::LabState& st,
                                         const scenario::Scenario& s, const CheckTools& tools,
                                         const CheckReport& rep) {
  const int n = std::max(1, ex.check.rounds);
  if (n == 1) return bench_readings(ex, st, s, tools, rep);
  const int need = n / 2 + 1;
  int count[3] = {0, 0, 0};  // by Verdict
  std::optional<CheckReport> last[3];
  std::string rounds;
  for (int i = 0; i < n; ++i) {
    auto r = bench_readings(ex, st, s, tools, rep);
    if (!r) return r;
    const int k = static_cast<int>(r->verdict);
    ++count[k];
    std::string busbw = "no busbw";
    for (const auto& v : r->values)
      if (v.name == "busbw" && v.measured) busbw = fmt::format("busbw {:.1f} Mbit/s", *v.measured);
    rounds +=
        fmt::format("{}round {} {} ({})", i ? ", " : "", i + 1, verdict_word(r->verdict), busbw);
    last[k] = std::move(*r);
    const int left = n - i - 1;
    const int lead = std::max(count[0], count[1]);
    if (lead >= need || lead + left < need) break;
  }
  const int total = count[0] + count[1] + count[2];
  Verdict v = count[static_cast<int>(Verdict::kPass)] >= need   ? Verdict::kPass
              : count[static_cast<int>(Verdict::kFail)] >= need ? Verdict::kFail
                                                                : Verdict::kNotJudged;
  CheckReport out = std::move(*last[static_cast<int>(v)]);
  out.verdict = v;
  out.diagnosis =
      fmt::format(
          "{} of {} round(s) {} ({} rounds at most, each with new connections, so a new draw "
          "of an l4 hash and of TCP's losses; a majority decides): {}. The deciding round: ",
          count[static_cast<int>(v)], total,
          v == Verdict::kNotJudged ? "not judged and no majority" : verdict_word(v), n, rounds) +
      out.diagnosis;
  out.method += fmt::format("; up to {} rounds, judged by majority", n);
  return out;
}

// "dc/tor0" -> "dc/tor0a" (and the '-' form) for every dual-ToR region of `s`.
std::string dual_tor_names(std::string text, const scenario::Scenario& s) {
  for (const auto& r : s.regions) {
    if (!r.dual_tor) continue;
    for (int j = 0; j < s.rails(r); ++j)
      for (const char sep : {'/', '-'}) {
        const std::string from = "\"" + r.name + sep + "tor" + std::to_string(j) + "\"";
        const std::string to = "\"" + r.name + sep + "tor" + std::to_string(j) + "a\"";
        for (size_t p = text.find(from); p != std::string::npos; p = text.find(from, p + 1))
          text.replace(p, from.size(), to);
      }
  }
  return text;
}

// The lab's own figures for one pair on the tier it talks over: the links of that tier the
// pair's traffic crosses (nvl: both GPUs' scale-up links; rail: both GPUs' scale-out links;
// frontend: both GPUs' scale-up links, both servers' frontend links and, across regions, both
// regions' uplinks and the primary WAN link between them); rate = their lowest emulated rate,
// delay = the sum of their emulated one-way delays.
struct PairFigures {
  std::string tier;  // "nvl", "rail", "frontend"; "" = unreachable
  double rate_bps = 0;
  double delay_us = 0;
};

PairFigures pair_figures(const plan::Topology& topo, const plan::Node& a, const plan::Node& b) {
  PairFigures f;
  auto r = plan::reach(a, b, plan::wan_adjacency(topo));
  if (!r) return f;
  // Inside a server NVLink, inside a region the rail, else the frontend (its VPC and, across
  // regions, the WAN): plan::reach's label, except that a GPU reaches what is outside its
  // region from its NVLink-side address, through its server (reach says "nvl" for that).
  const std::string label = r->second;
  const bool same_server = a.region == b.region && a.server == b.server;
  f.tier = label == "rail" ? "rail" : label == "nvl" && same_server ? "nvl" : "frontend";
  std::vector<const plan::Link*> links;
  auto first_of = [&](plan::Tier t, const std::string& node) {
    for (const auto& l : topo.links)
      if (l.tier == t && (l.a.node == node || l.b.node == node)) {
        links.push_back(&l);
        return;
      }
  };
  if (f.tier == "nvl" || f.tier == "frontend") {
    first_of(plan::Tier::kScaleUp, a.name);
    first_of(plan::Tier::kScaleUp, b.name);
  }
  if (f.tier == "rail") {
    first_of(plan::Tier::kScaleOut, a.name);
    first_of(plan::Tier::kScaleOut, b.name);
  }
  if (f.tier == "frontend") {
    first_of(plan::Tier::kFrontend, scenario::server_node(a.region, a.server));
    first_of(plan::Tier::kFrontend, scenario::server_node(b.region, b.server));
    if (a.region != b.region) {
      first_of(plan::Tier::kUplink, a.region + "/vpc");
      first_of(plan::Tier::kUplink, b.region + "/vpc");
      for (const auto& l : topo.links)
        if (l.tier == plan::Tier::kWan && l.role == "primary" &&
            ((l.a.node == a.region + "/tr" && l.b.node == b.region + "/tr") ||
             (l.b.node == a.region + "/tr" && l.a.node == b.region + "/tr")))
          links.push_back(&l);
    }
  }
  for (const auto* l : links) {
    if (l->emulated.rate.bps > 0 && (f.rate_bps == 0 || l->emulated.rate.bps < f.rate_bps))
      f.rate_bps = l->emulated.rate.bps;
    f.delay_us += static_cast<double>(l->emulated.delay.ns) / 1e3;
  }
  return f;
}

struct StudentPair {
  std::string a, b, tier;
  std::optional<Rate> rate;
  std::optional<Duration> delay;
};

// The student's measurements file: [[pair]] a, b, tier, rate, delay; exit 2 with file:line on
// what is malformed (an empty tier and "0" figures are "not measured yet", judged FAIL).
Result<std::vector<StudentPair>> read_measurements(const std::string& path) {
  auto text = read_text(path, "the student's measurements");
  if (!text) return std::unexpected(text.error());
  toml::value root;
  try {
    std::istringstream in(*text);
    root = toml::parse(in, path);
  } catch (const toml::exception& e) {
    return bad_input(path + ":" + std::to_string(e.location().line()) + ":" +
                     std::to_string(e.location().column()) + ": malformed TOML: " + e.what());
  } catch (const std::exception& e) {
    return bad_input(path + ": malformed TOML: " + e.what());
  }
  scenario::detail::Diags d(path);
  scenario::detail::Table top(root, "", "the top level", {"pair"}, d);
  std::vector<StudentPair> out;
  int n = 0;
  for (const toml::value* v : scenario::detail::table_array(top, "pair")) {
    ++n;
    scenario::detail::Table t(*v, "pair #" + std::to_string(n), "[[pair]]",
                              {"a", "b", "tier", "rate", "delay"}, d);
    StudentPair p;
    p.a = scenario::canonical_node(t.str("a", true).value_or(""));
    p.b = scenario::canonical_node(t.str("b", true).value_or(""));
    p.tier = t.str("tier").value_or("");
    if (!p.tier.empty()) t.one_of("tier", p.tier, {"nvl", "rail", "frontend"});
    p.rate = t.rate("rate");
    p.delay = t.duration("delay");
    t.finish();
    out.push_back(p);
  }
  top.finish();
  if (!d.empty()) return bad_input(d.text());
  return out;
}

Result<CheckReport> measure_file(const Exercise& ex, const lab::LabState& st, CheckReport rep) {
  const CheckSpec& c = ex.check;
  const std::string path =
      std::filesystem::path(rep.scenario_copy).parent_path().string() + "/" + c.file;
  auto student = read_measurements(path);
  if (!student) return std::unexpected(student.error());
  rep.method = fmt::format(
      "your {} against the lab's own figures (its topology as built: the emulated rate and "
      "one-way delay of the links each pair's tier crosses); rate within {:.0f}%, delay within "
      "{:.0f}% + {:.0f} us",
      path, c.tolerance * 100, c.tolerance * 100, c.delay_slack_us);
  std::vector<std::string> wrong;
  for (const auto& [a_in, b_in] : c.pairs) {
    const std::string a = scenario::canonical_node(a_in), b = scenario::canonical_node(b_in);
    const plan::Node* na = st.topo.node(a);
    const plan::Node* nb = st.topo.node(b);
    if (!na || !nb)
      return bad_input(ex.dir + "/check.toml: check: pairs: " + (na ? b : a) +
                       " is not a node of lab " + st.lab);
    const PairFigures lab = pair_figures(st.topo, *na, *nb);
    const StudentPair* sp = nullptr;
    for (const auto& p : *student)
      if ((p.a == a && p.b == b) || (p.a == b && p.b == a)) sp = &p;
    const std::string name = a + " <-> " + b;
    if (!sp) {
      wrong.push_back(name + ": not in " + c.file);
      continue;
    }
    if (sp->tier.empty())
      wrong.push_back(name + ": no tier given");
    else if (sp->tier != lab.tier)
      wrong.push_back(name + ": tier " + sp->tier + " is not the network this pair talks over");
    CheckValue rate;
    rate.name = name + " rate";
    rate.unit = "Mbit/s";
    rate.target = lab.rate_bps / 1e6;
    rate.within = rate.target * c.tolerance;
    rate.how = "the lowest emulated rate on the pair's tier";
    if (sp->rate && sp->rate->bps > 0) rate.measured = sp->rate->bps / 1e6;
    rate.ok = rate.measured && std::abs(*rate.measured - rate.target) <= rate.within;
    if (!rate.ok)
      wrong.push_back(name + (rate.measured ? fmt::format(": rate {:.1f} Mbit/s is off by more "
                                                          "than {:.0f}%",
                                                          *rate.measured, c.tolerance * 100)
                                            : std::string(": no rate given")));
    CheckValue delay;
    delay.name = name + " delay";
    delay.unit = "us";
    delay.target = lab.delay_us;
    delay.within = lab.delay_us * c.tolerance + c.delay_slack_us;
    delay.how = "the sum of the emulated one-way delays on the pair's tier";
    if (sp->delay) delay.measured = static_cast<double>(sp->delay->ns) / 1e3;
    delay.ok = delay.measured && std::abs(*delay.measured - delay.target) <= delay.within;
    if (!delay.ok)
      wrong.push_back(name + (delay.measured
                                  ? fmt::format(": one-way delay {:.0f} us is off by more than "
                                                "{:.0f} us",
                                                *delay.measured, delay.within)
                                  : std::string(": no delay given")));
    rep.values.push_back(rate);
    rep.values.push_back(delay);
  }
  rep.verdict = wrong.empty() ? Verdict::kPass : Verdict::kFail;
  for (const auto& w : wrong) rep.diagnosis += (rep.diagnosis.empty() ? "" : "; ") + w;
  return rep;
}

// A checkpoint workload's size, cadence and regions are the job's requirement (how much state
// the standby needs, and how often: the recovery point); the fix is how it is sent (mode, qos,
// streams). The student's copy against the exercise's own scenario: exit 2 naming the key.
Status same_checkpoint(const Exercise& ex, const scenario::Workload& w,
                       const std::string& copy_path) {
  auto start = scenario::load(ex.scenario_path());
  if (!start) return std::unexpected(start.error());
  const scenario::Workload* o = find_workload(*start, w.name);
  if (!o || o->kind != "checkpoint") return {};
  std::string key, was;
  if (w.bytes != o->bytes)
    key = "bytes", was = format_size(o->bytes);
  else if (w.every.ns != o->every.ns || w.every_steps != o->every_steps)
    key = "every",
    was = o->every_steps ? std::to_string(o->every_steps) + " steps" : format_duration(o->every);
  else if (w.from != o->from || w.to != o->to)
    key = "from/to", was = o->from + " -> " + o->to;
  if (key.empty()) return {};
  return bad_input(fmt::format(
      "{}:{}:{}: workload \"{}\": {}: changed; the checkpoint's size, cadence and regions are "
      "the job's requirement (the exercise's scenario: {}): change how it is sent (mode, qos, "
      "streams), not what or how often (`exercise reset` restores the starting file)",
      copy_path, w.loc.line, w.loc.col, w.name, key, was));
}

}  // namespace

Result<scenario::Scenario> run_scenario_of(const Exercise& ex, const std::string& copy_text,
                                           const std::string& copy_path) {
  const CheckSpec& c = ex.check;
  auto alone = scenario::load_text(copy_text, copy_path);
  if (!alone) return std::unexpected(alone.error());
  if (!alone->faults.empty())
    return bad_input(fmt::format(
        "{}:{}:{}: fault: the timeline is the checker's (check.toml); remove the [[fault]] "
        "tables from your copy",
        copy_path, alone->faults.front().loc.line, alone->faults.front().loc.col));
  const auto& e = alone->expect;
  if (e.max_stall_ms || e.min_busbw_fraction || e.max_detection_ms || e.max_recovery_ms ||
      e.checkpoint_on_time || e.max_gold_p99_ms)
    return bad_input(fmt::format(
        "{}:{}:{}: expect: the targets are the checker's (check.toml [target]); remove [expect] "
        "from your copy",
        copy_path, e.loc.line, e.loc.col));
  const auto* w = find_workload(*alone, c.workload);
  if (!w) {
    auto r = workload_missing(copy_path, c.workload);
    return std::unexpected(r.error());
  }
  if (w->kind == "checkpoint") TB_TRY(same_checkpoint(ex, *w, copy_path));
  // check.toml's faults keep their own line numbers (the rest of check.toml blanked), then the
  // targets as [expect], then the student's scenario.
  std::string text = dual_tor_names(c.faults_text, *alone) + "[expect]\n";
  if (c.max_stall_ms) text += fmt::format("max_stall_ms = {}\n", *c.max_stall_ms);
  if (c.max_detection_ms) text += fmt::format("max_detection_ms = {}\n", *c.max_detection_ms);
  if (c.max_recovery_ms) text += fmt::format("max_recovery_ms = {}\n", *c.max_recovery_ms);
  if (c.max_gold_p99_ms) text += fmt::format("max_gold_p99_ms = {}\n", *c.max_gold_p99_ms);
  if (c.checkpoint_on_time) text += "checkpoint_on_time = true\n";
  text += copy_text;
  auto s = scenario::load_text(text, ex.dir + "/check.toml");
  if (!s) return std::unexpected(s.error());
  s->file = copy_path;
  return s;
}

namespace {

Result<CheckReport> measure_run(const Exercise& ex, lab::LabState& st, const std::string& copy_text,
                                const CheckTools& tools, CheckReport rep) {
  const CheckSpec& c = ex.check;
  auto s = run_scenario_of(ex, copy_text, rep.scenario_copy);
  if (!s) return std::unexpected(s.error());
  s->lab = st.lab;

  experiment::RunOptions o;
  o.workload = c.workload;
  // A checkpoint runs beside the run's steady workload; named by the check, it is the measured
  // one and the run drives none.
  const auto* measured_w = find_workload(*s, c.workload);
  const bool checkpoint = measured_w && measured_w->kind == "checkpoint";
  if (checkpoint) o.workload = "none";
  o.size_bytes = c.size;
  o.settle_ms = c.settle_ms;
  o.tb_rank = tools.tb_rank;
  o.tb_probe = tools.tb_probe;
  TB_TRY(experiment::check_run(*s, st, o));
  auto lock = lab::LabLock::acquire(st.lab);
  if (!lock) return std::unexpected(lock.error());
  auto before = verify::sample_host(stage_files(st));
  std::atomic<bool> stop{false};
  auto res = experiment::run_scenario(*s, st, o, stop, [](const std::string&) {});
  auto after = verify::sample_host(stage_files(st));
  if (!res) return std::unexpected(res.error());
  rep.host = verify::host_load(before, after);
  rep.results_dir = res->results_dir;
  if (checkpoint)
    rep.method = fmt::format(
        "run of {:.1f} s with checkpoint workload \"{}\" replicating on its cadence (no other "
        "workload); gold p99 = tb-probe rtt in the gold class (DSCP {}) across its WAN, one every "
        "{} ms, lost probes counted as slowest; on time = a replication ended before the next "
        "was due (replication 0, the seed, not judged); shaping {}",
        o.settle_ms / 1000.0, c.workload, res->gold ? res->gold->dscp : 0,
        experiment::kGoldIntervalUs / 1000, st.shaping.empty() ? "none" : st.shaping);
  else
    rep.method = fmt::format(
        "run of workload \"{}\" ({} byte messages) under check.toml's {} fault(s), probes every "
        "{} ms on each faulted path; stall = longest gap between iterations across a fault less "
        "one baseline iteration, detection = first control-plane reaction, outage = longest run "
        "of lost probes; shaping {}",
        c.workload, c.size, s->faults.size(), o.probe_interval_us / 1000,
        st.shaping.empty() ? "none" : st.shaping);
  // What the lab explains: gold sharing the checkpoint's queue on the WAN (no classes, or the
  // checkpoint marked gold), and a late replication whose bytes need longer at the WAN link's
  // emulated rate than the cadence allows (`every`): it could not have kept up had it started on
  // time. One that started late behind a slow predecessor is not the lab's for certain.
  const bool gold_shares_queue = !s->qos.enabled || (measured_w && measured_w->qos == "gold");
  std::vector<std::string> late_lines;
  bool late_explained = false;
  for (const auto& ck : res->summary.value("checkpoints", nlohmann::json::array())) {
    const double every_s =
        ck.value("every_s", nlohmann::json()).is_number() ? ck["every_s"].get<double>() : 0.0;
    const double wan_bps = ck.value("wan_bps", 0.0);
    int late = 0, judged = 0;
    std::string reps;
    for (const auto& r : ck.value("replications", nlohmann::json::array())) {
      if (r.value("rep", 0) == 0 || r.value("error", "") == "unfinished when the run ended")
        continue;
      ++judged;
      if (r.value("on_time", true)) continue;
      ++late;
      const double bytes = static_cast<double>(r.value("payload_bytes", uint64_t{0}));
      const double next_due_s = every_s > 0 ? (r.value("due_ns", int64_t{0}) / 1e9 + every_s) : 0;
      const double over_s = next_due_s > 0 ? r.value("end_ns", int64_t{0}) / 1e9 - next_due_s : 0;
      const double needs_s = wan_bps > 0 ? bytes * 8 / wan_bps : 0;
      if (needs_s > 0 && every_s > 0 && needs_s > every_s) late_explained = true;
      if (late <= 4)
        reps += fmt::format(
            "{}replication {} ({} bytes in {:.2f} s) ended {:.2f} s after the next "
            "was due",
            late > 1 ? ", " : "", r.value("rep", 0), bytes, r.value("seconds", 0.0), over_s);
    }
    if (late > 0)
      late_lines.push_back(fmt::format(
          "checkpoint {} ({} mode, every {:.1f} s): {} of {} replication(s) after the seed late: "
          "{}{}; at the {} link's emulated {} a full checkpoint ({} bytes) needs {:.2f} s",
          ck.value("workload", ""), ck.value("mode", ""), every_s, late, judged, reps,
          late > 4 ? ", ..." : "", ck.value("wan", ""), mbit(wan_bps),
          ck.value("emulated_bytes", uint64_t{0}),
          wan_bps > 0 ? ck.value("emulated_bytes", uint64_t{0}) * 8 / wan_bps : 0.0));
  }
  bool explained = false, all_ok = true;
  const auto outage = res->recovery.max_outage_ms();
  for (const auto& v : res->verdicts) {
    CheckValue cv;
    cv.name = v.name;
    cv.measured = v.measured;
    cv.target = v.limit;
    cv.at_least = false;
    cv.unit = v.name == "checkpoint_on_time" ? "late" : "ms";
    cv.ok = v.ok;
    cv.how = v.text;
    rep.values.push_back(cv);
    if (v.ok) continue;
    all_ok = false;
    // Lost probes and missing reactions are the network's, not the host's: an outage of at
    // least TCP's minimum retransmission timeout (200 ms) costs the workload's flows a timeout
    // whatever the host does. Gold behind the checkpoint's queue and a replication the link
    // could not carry in time are the lab's too.
    if (!v.measured || v.name == "max_recovery_ms" ||
        (v.name == "max_stall_ms" && outage && *outage >= std::min(v.limit, kRtoMinMs)) ||
        (v.name == "max_gold_p99_ms" && gold_shares_queue) ||
        (v.name == "checkpoint_on_time" && late_explained))
      explained = true;
  }
  if (res->gold) rep.diagnosis = res->gold->text();
  for (const auto& l : late_lines) rep.diagnosis += (rep.diagnosis.empty() ? "" : "; ") + l;
  if (res->gold && !all_ok && gold_shares_queue)
    rep.diagnosis += !s->qos.enabled ? "; [qos] is off: gold waits in the WAN link's one queue"
                                     : "; the checkpoint is marked gold: it fills gold's own queue";
  for (const auto& err : res->errors) {
    all_ok = false;
    rep.diagnosis += (rep.diagnosis.empty() ? "" : "; ") + err;
  }
  // The worst fault, in measured terms.
  for (const auto& f : res->recovery.faults) {
    std::string line = fmt::format("fault {} ({}):", f.fault.id, f.fault.target);
    line += f.stall_ms ? fmt::format(" the workload stalled {:.0f} ms", *f.stall_ms)
                       : std::string(" no stall measured");
    line += f.outage_ms ? fmt::format(", probes on its path lost for {:.0f} ms", *f.outage_ms)
                        : std::string(", no probe lost");
    line += f.detection_ms ? fmt::format(", first reaction after {:.0f} ms ({})", *f.detection_ms,
                                         f.detected_by)
                           : std::string(", nothing in the control plane reacted");
    rep.diagnosis += (rep.diagnosis.empty() ? "" : "; ") + line;
  }
  if (all_ok) {
    rep.verdict = Verdict::kPass;
  } else if (rep.host.host_bound && !explained) {
    rep.verdict = Verdict::kNotJudged;
    rep.diagnosis += "; but the host was busy (" + rep.host.text() +
                     ") and nothing in the lab explains the miss: not judged, check again when "
                     "it is quieter";
  } else {
    rep.verdict = Verdict::kFail;
  }
  return rep;
}

}  // namespace

Result<CheckReport> measure(const Exercise& ex, const std::string& lab,
                            const std::string& scenario_copy, const CheckTools& tools) {
  CheckReport rep;
  rep.exercise = ex.id;
  rep.title = ex.title;
  rep.lab = lab;
  rep.scenario_copy = scenario_copy;
  auto st = lab::load_state(lab);
  if (!st)
    return bad_input("lab " + lab + " is not up; `testbedctl exercise start " +
                     std::to_string(ex.number) + "` builds it");
  if (st->phase != "up") return bad_input("lab " + lab + " is " + st->phase + ", not up");
  auto copy_text = read_text(scenario_copy, "the exercise's scenario copy");
  if (!copy_text) return std::unexpected(copy_text.error());
  auto s = scenario::load_text(*copy_text, scenario_copy);
  if (!s) return std::unexpected(s.error());
  if (ex.check.measure == Measure::kFile) return measure_file(ex, *st, std::move(rep));
  if (ex.check.measure == Measure::kBench) return measure_bench_rounds(ex, *st, *s, tools, rep);
  return measure_run(ex, *st, *copy_text, tools, std::move(rep));
}

}  // namespace tb::exercise
