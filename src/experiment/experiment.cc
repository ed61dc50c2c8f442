#include "experiment/experiment.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/units.h"
#include "experiment/across_hosts.h"
#include "experiment/checkpoint_workload.h"
#include "experiment/scenario_run.h"
#include "experiment/train_sweep.h"
#include "fault/fault.h"
#include "launch/place.h"
#include "workload/job.h"

namespace tb::experiment {

bool RunResult::ok() const {
  if (!errors.empty()) return false;
  for (const auto& v : verdicts)
    if (!v.ok) return false;
  return true;
}

Status check_options(const RunOptions& o) {
  if (o.size_bytes < 4)
    return bad_input("--size: must be at least 4 bytes (got " + format_size(o.size_bytes) + ")");
  TB_TRY(workload::check_rank_timeout_ms(o.timeout_ms));
  if (!kSettleSeconds.contains(o.settle_ms / 1000.0))
    return bad_input("--settle: must be " + kSettleSeconds.text() + " seconds");
  return workload::validate(o.transport);
}

Status check_run(const scenario::Scenario& s, const lab::LabState& st, const RunOptions& o) {
  TB_TRY(check_options(o));
  TB_TRY(check_across_hosts(s, st, o));
  // On one host of a lab over several, every fault against the whole lab: each host fires the
  // ones it holds a part of (across_hosts.h).
  lab::LabState whole = st;
  whole.host.clear();
  for (const auto& f : s.faults) {
    auto r = fault::resolve(whole, f);
    if (!r)
      return std::unexpected(with_context(r.error(), s.file + ":" + std::to_string(f.loc.line) +
                                                         ": [[fault]] " +
                                                         scenario::to_string(f.kind)));
  }
  for (const auto& w : s.workloads)
    if (w.kind == "checkpoint")
      if (auto p = plan_checkpoint(s, w, st); !p) return std::unexpected(p.error());
  if (!o.workload.empty() && o.workload != "none" && !pick_workload(s, o))
    return bad_input("--workload " + o.workload +
                     ": no collective, command or training [[workload]] of that name in " + s.file);
  if (const auto* w = pick_workload(s, o); w && w->kind == "command") {
    launch::CommandOptions co;
    if (auto j = command_job(*w, st, &co); !j) return std::unexpected(j.error());
  } else if (w && w->kind == "training") {
    auto j = training_run_job(s, *w, st, o.transport, o.timeout_ms, "check", "/nonexistent");
    if (!j) return std::unexpected(with_context(j.error(), "[[workload]] " + w->name));
  } else if (w) {
    auto gpus = launch::select_ranks(st.topo, w->ranks);
    if (!gpus) return std::unexpected(gpus.error());
    if (o.transport.kind == workload::Transport::kRdma) {
      workload::Job j;
      j.transport.kind = workload::Transport::kRdma;
      TB_TRY(launch::place_ranks(j, st.topo, *gpus));
      launch::mark_rdma_pairs(j, st.rxe);
      if (workload::count_rdma_pairs(j).rdma == 0)
        return bad_input("--transport rdma: no pair of workload " + w->name +
                         "'s ranks can use RDMA (lab " + st.lab + " rdma: " + st.rdma +
                         (st.rdma_why.empty() ? "" : ", " + st.rdma_why) +
                         "); run `testbedctl doctor` to see why, or use --transport tcp");
    }
  }
  return {};
}

std::vector<Verdict> check_expectations(const scenario::Expect& e, const metrics::RecoveryReport& r,
                                        std::optional<double> busbw_fraction) {
  std::vector<Verdict> out;
  auto add = [&](const char* name, std::optional<double> limit, std::optional<double> measured,
                 bool upper, const std::string& what) {
    if (!limit) return;
    Verdict v{name, *limit, measured, true, ""};
    v.ok = measured && (upper ? *measured <= *limit : *measured >= *limit);
    v.text = fmt::format("{} {} {:g}: measured {} ({})", name, upper ? "<=" : ">=", *limit,
                         measured ? std::to_string(*measured) : "nothing", what);
    out.push_back(v);
  };
  bool undetected = false;
  for (const auto& f : r.faults) undetected = undetected || !f.detection_ms;
  add("max_stall_ms", e.max_stall_ms, r.max_stall_ms(), true, "the longest workload stall");
  add("max_detection_ms", e.max_detection_ms, undetected ? std::nullopt : r.max_detection_ms(),
      true, undetected ? "a fault no control plane reacted to" : "the slowest detection");
  add("max_recovery_ms", e.max_recovery_ms, r.max_outage_ms(), true,
      "the longest data-plane outage on a probed path");
  add("min_busbw_fraction", e.min_busbw_fraction, busbw_fraction, false,
      "workload throughput over the run / before the first fault");
  return out;
}

std::optional<Verdict> checkpoint_verdict(const scenario::Expect& e, int late, int total,
                                          const std::string& what) {
  if (!e.checkpoint_on_time) return std::nullopt;
  Verdict v{"checkpoint_on_time", 0, static_cast<double>(late), true, ""};
  v.ok = *e.checkpoint_on_time ? late == 0 && total > 0 : true;
  v.text = fmt::format("checkpoint_on_time = {}: {} of {} replication(s) late ({})",
                       *e.checkpoint_on_time, late, total, what);
  return v;
}

std::optional<double> percentile_with_lost(std::vector<double> samples, int lost, double q) {
  const size_t answered = samples.size();
  const size_t n = answered + static_cast<size_t>(std::max(0, lost));
  if (n == 0) return std::nullopt;
  std::sort(samples.begin(), samples.end());
  const double rank = q * static_cast<double>(n - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const auto hi = static_cast<size_t>(std::ceil(rank));
  const double frac = rank - static_cast<double>(lo);
  if (lo >= answered || (hi >= answered && frac > 0)) return std::nullopt;
  if (hi >= answered || hi == lo) return samples[lo];
  return samples[lo] + (samples[hi] - samples[lo]) * frac;
}

std::string GoldProbe::text() const {
  const std::string how = fmt::format(
      "tb-probe rtt {} -> {} ({}) against tb-probe serve, DSCP {} both ways (the gold class), "
      "one every {} ms for the whole run, across {} (checkpoint {}'s WAN); CLOCK_MONOTONIC "
      "round trips",
      src, dst, addr, dscp, interval_us / 1000,
      wan.empty() ? std::string("the WAN") : "WAN link " + wan, checkpoint);
  if (!measured) return "gold probe: no result (" + how + ")";
  const int lost = sent - received;
  return fmt::format(
      "gold probe: p50 {:.1f} ms, p99 {:.1f} ms, max {:.1f} ms, {} of {} lost{} ({})", p50_ms,
      p99_ms, max_ms, lost, sent,
      lost == 0 ? ""
      : p99_with_lost_ms
          ? fmt::format(" (p99 counting them as slowest: {:.1f} ms)", *p99_with_lost_ms)
          : std::string(" (counting them as slowest, the p99 falls on a lost "
                        "probe)"),
      how);
}

std::optional<Verdict> gold_verdict(const scenario::Expect& e, const std::optional<GoldProbe>& g) {
  if (!e.max_gold_p99_ms) return std::nullopt;
  Verdict v{"max_gold_p99_ms", *e.max_gold_p99_ms, std::nullopt, false, ""};
  if (g && g->measured) v.measured = g->p99_with_lost_ms;
  v.ok = v.measured && *v.measured <= v.limit;
  std::string measured;
  if (!g || !g->measured)
    measured = "nothing (the gold probe printed no result)";
  else if (!v.measured)
    measured = fmt::format("a lost probe ({} of {} lost: the p99 falls on one)",
                           g->sent - g->received, g->sent);
  else
    measured = g->sent == g->received
                   ? fmt::format("{:.1f} ms (none of {} lost)", *v.measured, g->sent)
                   : fmt::format("{:.1f} ms ({} of {} lost, counted as slowest)", *v.measured,
                                 g->sent - g->received, g->sent);
  v.text = fmt::format("max_gold_p99_ms <= {:g}: measured {} (the gold probe {} -> {}, DSCP {})",
                       v.limit, measured, g ? g->src : "-", g ? g->dst : "-", g ? g->dscp : 0);
  return v;
}

Result<RunResult> run_scenario(const scenario::Scenario& s, lab::LabState& st, const RunOptions& o,
                               const std::atomic<bool>& stop,
                               const std::function<void(const std::string&)>& progress) {
  TB_TRY(check_run(s, st, o));
  if (spans_hosts(st)) return run_across_hosts(s, st, o, stop, progress);
  ScenarioRun run(s, st, o, stop, progress);
  TB_TRY(run.prepare());
  TB_TRY(run.start_monitors());
  TB_TRY(run.start_workload());
  TB_TRY(run.start_probes());
  run.fire_timeline();
  run.collect();
  return run.summarise();
}

}  // namespace tb::experiment
