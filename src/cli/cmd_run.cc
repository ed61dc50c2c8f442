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
#include "report/run.h"
#include "scenario/loader.h"

namespace tb::cli {
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
    std::fputs(report::run_text(*res).c_str(), stdout);
    rc = res->ok() ? kExitOk : kExitFailed;
  }
  if (f.down)
    if (int d = cmd_down(s->lab); d != kExitOk && rc == kExitOk) rc = d;
  return rc;
}

}  // namespace tb::cli
