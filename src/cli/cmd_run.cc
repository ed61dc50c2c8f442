// run: a scenario end to end (run/experiment.h). Brings the lab up when it is not, runs the
// workload with the fault timeline, prints the recovery breakdown and the [expect] verdicts,
// and with --down takes the lab down after. Exit 0 when every expectation held and nothing
// failed, 1 otherwise, 2 for bad input.
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/stop_signals.h"
#include "core/process.h"
#include "core/units.h"
#include "experiment/experiment.h"
#include "lab/state.h"
#include "lab/up.h"
#include "scenario/loader.h"

namespace tb::cli {
namespace {

std::string fmt_ms(const std::optional<double>& v) {
  if (!v) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", *v);
  return b;
}

}  // namespace

int cmd_run(const std::string& target, const RunFlags& f) {
  // A scenario file, or the name of a lab that is up (its scenario is in its state).
  std::string path = target, lab = f.name;
  if (!std::filesystem::exists(target)) {
    auto st = lab::load_state(target);
    if (!st)
      return report(Error{"run: " + target + " is neither a scenario file nor a lab that is up", 0,
                          kExitBadInput});
    path = st->scenario;
    lab = st->lab;
  }
  auto s = scenario::load(path);
  if (!s) return report(s.error());
  if (!lab.empty()) s->lab = lab;
  experiment::RunOptions o;
  o.workload = f.workload;
  auto size = parse_size(f.size);
  if (!size) return report(Error{"--size: " + size.error().message, 0, kExitBadInput});
  o.size_bytes = *size;
  o.timeout_ms = static_cast<int>(f.timeout_s * 1000);
  o.resilient = f.resilient;
  o.transport = f.transport;
  if (auto rc = require_root("run")) return *rc;
  auto tb_rank = find_companion("tb-rank", "TESTBEDCTL_RANK");
  if (!tb_rank) return report(tb_rank.error());
  auto tb_probe = find_companion("tb-probe", "TESTBEDCTL_PROBE");
  if (!tb_probe) return report(tb_probe.error());
  o.tb_rank = *tb_rank;
  o.tb_probe = *tb_probe;

  auto st = lab::load_state(s->lab);
  if (!st) {
    auto up = lab::bring_up({path, {s->lab, f.shaping, "auto"}});
    if (!up) return report(up.error());
    print_up(*up);
    st = std::move(up->state);
  }
  if (auto r = experiment::check_run(*s, *st, o); !r) return report(r.error());
  int rc = kExitOk;
  {
    auto lock = lab::LabLock::acquire(s->lab);
    if (!lock) return report(lock.error());
    StopSignals signals;
    auto res = experiment::run_scenario(*s, *st, o, signals.flag(), [](const std::string& line) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    });
    if (!res) return report(res.error());
    std::printf("\nRECOVERY (ms; CLOCK_MONOTONIC; baseline iteration %s ms)\n",
                fmt_ms(res->recovery.baseline_iter_ms).c_str());
    std::printf("%-3s %-48s %9s %9s %9s %9s %9s\n", "#", "FAULT", "DETECT", "REROUTE", "OUTAGE",
                "STALL", "THRUPUT");
    for (const auto& r : res->recovery.faults)
      std::printf("%-3d %-48s %9s %9s %9s %9s %9s\n", r.fault.id,
                  r.fault.target.substr(0, 48).c_str(), fmt_ms(r.detection_ms).c_str(),
                  fmt_ms(r.reroute_ms).c_str(), fmt_ms(r.outage_ms).c_str(),
                  fmt_ms(r.stall_ms).c_str(),
                  r.degraded_fraction ? (fmt_ms(*r.degraded_fraction * 100) + "%").c_str() : "-");
    std::printf("# %s\n", res->summary["measured"].get<std::string>().c_str());
    for (const auto& v : res->verdicts)
      std::printf("expect %s %s\n", v.ok ? "ok    " : "FAILED", v.text.c_str());
    for (const auto& e : res->errors) std::printf("error: %s\n", e.c_str());
    std::printf("results: %s\n", res->results_dir.c_str());
    rc = res->ok() ? kExitOk : kExitFailed;
  }
  if (f.down)
    if (int d = cmd_down(s->lab); d != kExitOk && rc == kExitOk) rc = d;
  return rc;
}

}  // namespace tb::cli
