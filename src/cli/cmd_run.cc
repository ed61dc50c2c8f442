// run: a scenario end to end (experiment/experiment.h). Brings the lab up when it is not, runs the
// workload with the fault timeline, prints the recovery breakdown and the [expect] verdicts,
// and with --down takes the lab down after. Exit 0 when every expectation held and nothing
// failed, 1 otherwise, 2 for bad input.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/flag_checks.h"
#include "cli/lab_text.h"
#include "cli/progress.h"
#include "cli/stop_signals.h"
#include "cli/transport_flags.h"
#include "core/events.h"
#include "core/process.h"
#include "core/units.h"
#include "experiment/experiment.h"
#include "lab/down.h"
#include "lab/state.h"
#include "lab/up.h"
#include "multihost/session.h"
#include "plan/host.h"
#include "report/html.h"
#include "report/run.h"
#include "scenario/loader.h"
#include "workload/job.h"

namespace tb::cli {
namespace {

struct RunFlags {
  std::string name, workload, size = "1M", shaping = "auto";
  double timeout_s = 30, settle_s = 3;
  bool down = false, resilient = false;
  int rendezvous_port = multihost::kDefaultPort;
  workload::TransportOptions transport;  // the workload's (its channels: the [[workload]]'s)
};

// The progress line of a run (on a terminal only): where the timeline is and what is left.
std::string run_status(const std::string& lab, const experiment::RunClock& c, double elapsed) {
  const int64_t t0 = c.t0_ns.load(), end = c.end_ns.load();
  if (t0 == 0)
    return fmt::format("run {}: starting the workload, monitors and probes  {:.1f} s", lab,
                       elapsed);
  if (end == 0) {
    const double in = static_cast<double>(monotonic_ns() - t0) / 1e9;
    const double len = static_cast<double>(c.length_ns.load()) / 1e9;
    return fmt::format("run {}: timeline {:.1f} of {:.1f} s, about {:.0f} s left", lab, in, len,
                       std::max(0.0, len - in));
  }
  return fmt::format("run {}: stopping the workloads and collecting the results  {:.1f} s", lab,
                     elapsed);
}

// A scenario end to end: workload + fault timeline + recovery analysis + [expect].
int cmd_run(const std::string& target, const RunFlags& f) {
  experiment::RunOptions o;
  o.workload = f.workload;
  auto size = parse_size(f.size);
  if (!size) return report(Error{"--size: " + size.error().message, 0, kExitBadInput});
  o.size_bytes = *size;
  o.timeout_ms = static_cast<int>(f.timeout_s * 1000);
  o.settle_ms = static_cast<int>(f.settle_s * 1000);
  o.resilient = f.resilient;
  o.transport = f.transport;
  o.rendezvous_port = f.rendezvous_port;
  // Every flag's own error before the scenario or the lab is read.
  if (auto r = experiment::check_options(o); !r) return report(r.error());

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
  if (auto rc = require_root("run")) return *rc;
  auto tb_rank = find_companion("tb-rank", "TESTBEDCTL_RANK");
  if (!tb_rank) return report(tb_rank.error());
  auto tb_probe = find_companion("tb-probe", "TESTBEDCTL_PROBE");
  if (!tb_probe) return report(tb_probe.error());
  o.tb_rank = *tb_rank;
  o.tb_probe = *tb_probe;

  auto st = lab::load_state(s->lab);
  if (!st && !s->hosts.empty())
    return report(Error{"run: lab " + s->lab + " is not up on this host, and " + path +
                            " spreads it over several hosts ([[host]]), which `run` cannot bring "
                            "up: run `testbedctl up " +
                            path +
                            " --host NAME` on each host first, then the same `testbedctl run " +
                            s->lab + "` on each",
                        0, kExitBadInput});
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
    // On a terminal, a status line (stderr) under the timeline's lines (stdout), redrawn every
    // 200 ms by a ticker; a line printed clears it first.
    experiment::RunClock clock;
    o.clock = &clock;
    Progress progress("run " + s->lab);
    std::mutex mu;
    std::atomic<bool> finished{false};
    std::thread ticker;
    if (progress.on_terminal())
      ticker = std::thread([&] {
        while (!finished.load()) {
          {
            std::lock_guard l(mu);
            progress.line(run_status(s->lab, clock, progress.elapsed()));
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
      });
    auto res = experiment::run_scenario(*s, *st, o, signals.flag(), [&](const std::string& line) {
      std::lock_guard l(mu);
      progress.done();
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    });
    finished = true;
    if (ticker.joinable()) ticker.join();
    progress.done();
    if (!res) return report(res.error());
    if (!res->gathered_on.empty()) {
      // A joining host of a lab over several: the results are the coordinator's.
      std::printf(
          "run %s: %s; summary.json, events.jsonl and every rank's rows are on host %s in "
          "%s\n",
          s->lab.c_str(), res->ok() ? "done" : "FAILED", res->gathered_on.c_str(),
          res->results_dir.c_str());
      for (const auto& e : res->errors) std::printf("  %s\n", e.c_str());
      rc = res->ok() ? kExitOk : kExitFailed;
    } else {
      std::fputs(report::run_text(*res).c_str(), stdout);
      // The HTML twin (report/html.h), with the lab's topology saved beside for later reports.
      if (auto h = report::write_html_report(res->results_dir, "", &st->topo))
        std::printf("report: %s\n", h->c_str());
      else
        std::fprintf(stderr, "run: no HTML report: %s\n", h.error().message.c_str());
      rc = res->ok() ? kExitOk : kExitFailed;
    }
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
  run->add_option("--name", rf.name, "lab name when bringing a scenario up")->check(lab_name());
  run->add_option("--workload", rf.workload, "a [[workload]] name, or none (default: the first)");
  run->add_option("--size", rf.size, "the steady workload's message size (at least 4)")
      ->capture_default_str()
      ->check(size_text());
  run->add_option("--timeout", rf.timeout_s, "ranks' idle timeout, seconds")
      ->capture_default_str()
      ->check(real_in(workload::kRankTimeoutSeconds));
  run->add_option("--shaping", rf.shaping, "when it brings the lab up: auto|none|netem|tbf|htb")
      ->capture_default_str()
      ->check(checked_by(plan::check_shaping, "auto|none|netem|tbf|htb"));
  add_transport_flags(run, rf.transport);
  run->add_flag("--down", rf.down, "take the lab down afterwards");
  run->add_flag("--resilient", rf.resilient,
                "restart the workload's ranks after a failure instead of ending it");
  run->add_option("--settle", rf.settle_s,
                  "seconds the run goes on after the last fault step (no faults: its length)")
      ->capture_default_str()
      ->check(real_in(experiment::kSettleSeconds));
  run->add_option("--rendezvous-port", rf.rendezvous_port,
                  "a lab over several hosts: the TCP port the coordinating host listens on (its "
                  "underlay address), the same on every host")
      ->capture_default_str()
      ->check(whole_in({1, 65535}));
  run->callback([target, flags, &rc] { rc = cmd_run(*target, *flags); });
}

}  // namespace tb::cli
