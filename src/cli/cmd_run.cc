// run: a scenario end to end (run/experiment.h). Brings the lab up when it is not, runs the
// workload with the fault timeline, prints the recovery breakdown and the [expect] verdicts,
// and with --down takes the lab down after. Exit 0 when every expectation held and nothing
// failed, 1 otherwise, 2 for bad input.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/lab_text.h"
#include "cli/stop_signals.h"
#include "cli/transport_flags.h"
#include "core/process.h"
#include "core/units.h"
#include "experiment/experiment.h"
#include "lab/down.h"
#include "lab/state.h"
#include "lab/up.h"
#include "scenario/loader.h"

namespace tb::cli {
namespace {

struct RunFlags {
  std::string name, workload, size = "1M", shaping = "auto";
  double timeout_s = 30;
  bool down = false, resilient = false;
  std::string transport = "tcp";                   // the workload's: tcp | rdma
  int qps = 1, ib_timeout = 14, ib_retry_cnt = 7;  // --transport rdma
};

std::string fmt_ms(const std::optional<double>& v) {
  if (!v) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", *v);
  return b;
}

// A scenario end to end: workload + fault timeline + recovery analysis + [expect].
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
  o.qps = f.qps;
  o.ib_timeout = f.ib_timeout;
  o.ib_retry_cnt = f.ib_retry_cnt;
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
  if (f.down) {
    auto d = lab::take_down({s->lab});
    if (d) {
      print_down(*d);
    } else {
      const int e = report(d.error());
      if (rc == kExitOk) rc = e;
    }
  }
  return rc;
}

}  // namespace

void add_run(CLI::App& app, int& rc) {
  auto target = std::make_shared<std::string>();
  auto flags = std::make_shared<RunFlags>();
  RunFlags& rf = *flags;
  auto* run = app.add_subcommand(
      "run", "a scenario end to end: workload, fault timeline, recovery, [expect] (root)");
  run->add_option("SCENARIO_OR_LAB", *target)->required();
  run->add_option("--name", rf.name, "lab name when bringing a scenario up");
  run->add_option("--workload", rf.workload, "a [[workload]] name, or none (default: the first)");
  run->add_option("--size", rf.size, "the steady workload's message size")->capture_default_str();
  run->add_option("--timeout", rf.timeout_s, "ranks' idle timeout, seconds")->capture_default_str();
  run->add_option("--shaping", rf.shaping, "when it brings the lab up")->capture_default_str();
  add_transport_flags(run, rf.transport, rf.qps, rf.ib_timeout, rf.ib_retry_cnt);
  run->add_flag("--down", rf.down, "take the lab down afterwards");
  run->add_flag("--resilient", rf.resilient,
                "restart the workload's ranks after a failure instead of ending it");
  run->callback([target, flags, &rc] { rc = cmd_run(*target, *flags); });
}

}  // namespace tb::cli
