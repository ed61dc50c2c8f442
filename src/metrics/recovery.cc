#include "metrics/recovery.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tb::metrics {
namespace {

double ms(int64_t ns) {
  return static_cast<double>(ns) / 1e6;
}

std::optional<double> median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

nlohmann::json opt(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

double RecoveryReport::max_stall_ms() const {
  double m = 0;
  for (const auto& f : faults)
    if (f.stall_ms) m = std::max(m, *f.stall_ms);
  return m;
}

std::optional<double> RecoveryReport::max_detection_ms() const {
  std::optional<double> m;
  for (const auto& f : faults)
    if (f.detection_ms) m = std::max(m.value_or(0), *f.detection_ms);
  return m;
}

std::optional<double> RecoveryReport::max_outage_ms() const {
  std::optional<double> m;
  for (const auto& f : faults)
    if (f.outage_ms) m = std::max(m.value_or(0), *f.outage_ms);
  return m;
}

RecoveryReport analyze(const RecoveryInput& in) {
  RecoveryReport rep;
  const int64_t first_fault =
      in.faults.empty() ? INT64_MAX
                        : std::min_element(in.faults.begin(), in.faults.end(),
                                           [](const FaultWindow& a, const FaultWindow& b) {
                                             return a.inject_ns < b.inject_ns;
                                           })
                              ->inject_ns;
  std::vector<double> before;
  for (const auto& it : in.iterations)
    if (it.end_ns <= first_fault) before.push_back(ms(it.end_ns - it.start_ns));
  rep.baseline_iter_ms = median(before);

  auto control = in.control;
  std::stable_sort(control.begin(), control.end(),
                   [](const ControlEvent& a, const ControlEvent& b) { return a.t_ns < b.t_ns; });
  for (size_t i = 0; i < in.faults.size(); ++i) {
    const auto& f = in.faults[i];
    FaultRecovery r;
    r.fault = f;
    const int64_t end = f.revert_ns > 0 ? f.revert_ns : in.run_end_ns;
    const int64_t from = f.requested_ns > 0 ? std::min(f.requested_ns, f.inject_ns) : f.inject_ns;
    // A PFC storm breaks no link or route: the watchdog's detection is its only detection.
    const bool storm = f.kind == "pfc-storm";
    for (const auto& c : control) {
      if (c.t_ns < from) continue;
      if (!r.detection_ms && (!storm || c.what == "pfcwd_detect")) {
        r.detection_ms = std::max(0.0, ms(c.t_ns - f.inject_ns));
        r.detected_by = c.what + " " + c.where + (c.detail.empty() ? "" : " " + c.detail);
      }
      if (!r.reroute_ms && (c.what == "route_add" || c.what == "route_del" ||
                            c.what == "fabric_withdraw" || c.what == "fabric_restore"))
        r.reroute_ms = std::max(0.0, ms(c.t_ns - f.inject_ns));
    }
    // Control events after the repair began belong to the repair, not to detection.
    const int64_t repair = f.revert_requested_ns > 0 ? f.revert_requested_ns : f.revert_ns;
    if (r.detection_ms && repair > 0 && f.inject_ns + *r.detection_ms * 1e6 >= repair) {
      r.detection_ms.reset();
      r.detected_by.clear();
    }
    if (r.reroute_ms && repair > 0 && f.inject_ns + *r.reroute_ms * 1e6 >= repair)
      r.reroute_ms.reset();
    if (i < in.outages.size())
      for (const auto& o : in.outages[i]) {
        if (o.b < f.inject_ns || o.a > end) continue;  // not during this fault
        const double d = ms(o.b - std::max(o.a, f.inject_ns));
        if (!r.outage_ms || d > *r.outage_ms) {
          r.outage_ms = d;
          r.outage_end_ns = o.b;
          // Before the repair was even asked for: something else (a failover) ended it.
          const int64_t repair = f.revert_requested_ns > 0 ? f.revert_requested_ns : f.revert_ns;
          r.recovered_before_repair = repair == 0 ? o.b < in.run_end_ns : o.b < repair;
        }
      }
    if (!r.outage_ms && i < in.probed.size() && in.probed[i]) r.outage_ms = 0;
    // Workload stall: the longest gap between consecutive iteration completions that spans
    // part of the fault, less one baseline iteration. The end of the run counts as a
    // completion, so a workload that never completed another iteration stalled until then.
    std::vector<double> during;
    std::optional<int64_t> prev_end;
    auto gap_to = [&](int64_t next_end) {
      if (prev_end && next_end > f.inject_ns && *prev_end < end) {
        const double gap = ms(next_end - *prev_end) - rep.baseline_iter_ms.value_or(0);
        r.stall_ms = std::max(r.stall_ms.value_or(0), std::max(0.0, gap));
      }
    };
    for (const auto& it : in.iterations) {
      gap_to(it.end_ns);
      if (it.start_ns >= f.inject_ns && it.end_ns <= end)
        during.push_back(ms(it.end_ns - it.start_ns));
      prev_end = it.end_ns;
    }
    if (prev_end && in.run_end_ns > *prev_end) gap_to(in.run_end_ns);
    r.iterations_during = static_cast<int>(during.size());
    if (!during.empty() && rep.baseline_iter_ms) {
      double sum = 0;
      for (double d : during) sum += d;
      r.degraded_fraction = *rep.baseline_iter_ms / (sum / static_cast<double>(during.size()));
    }
    rep.faults.push_back(std::move(r));
  }
  return rep;
}

nlohmann::json to_json(const RecoveryReport& r) {
  nlohmann::json faults = nlohmann::json::array();
  for (const auto& f : r.faults)
    faults.push_back({{"fault", f.fault.id},
                      {"kind", f.fault.kind},
                      {"target", f.fault.target},
                      {"inject_ns", f.fault.inject_ns},
                      {"revert_ns", f.fault.revert_ns},
                      {"detection_ms", opt(f.detection_ms)},
                      {"detected_by", f.detected_by},
                      {"reroute_ms", opt(f.reroute_ms)},
                      {"outage_ms", opt(f.outage_ms)},
                      {"recovered_before_repair", f.recovered_before_repair},
                      {"outage_end_ns", f.outage_end_ns},
                      {"stall_ms", opt(f.stall_ms)},
                      {"degraded_fraction", opt(f.degraded_fraction)},
                      {"iterations_during", f.iterations_during}});
  return {{"baseline_iter_ms", opt(r.baseline_iter_ms)},
          {"faults", faults},
          {"max_stall_ms", r.max_stall_ms()},
          {"max_detection_ms", opt(r.max_detection_ms())},
          {"max_outage_ms", opt(r.max_outage_ms())}};
}

}  // namespace tb::metrics
