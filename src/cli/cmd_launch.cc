// launch: any program as one process per selected GPU, in that GPU's namespace, with torchrun's
// environment (launch/command.h). Each rank's output is streamed with a "[rank N node]" prefix
// and logged to <results>/logs/rank<N>.log; job.json beside them.
// Exit 0 when every rank exited 0; 1 when a rank failed (the first non-zero exit ends the
// others, as torchrun does), --timeout passed or `down` ended the ranks; 130 on Ctrl-C; 2 for
// bad input (unknown lab, selector, tier, a command not found: nothing is started).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/flag_checks.h"
#include "cli/stop_signals.h"
#include "core/units.h"
#include "lab/state.h"
#include "launch/across_hosts.h"
#include "launch/command.h"
#include "report/launch.h"

namespace tb::cli {
namespace {

CLI::Validator job_duration() {
  return checked_by(launch::parse_job_duration_ms, "DURATION (90s, 10m, 1h)");
}

struct LaunchFlags {
  std::string lab, ranks = "all", tier = "auto", timeout, grace = "5s";
  int master_port = 29500;
  int rendezvous_port = multihost::kDefaultPort;
  bool mpi = false;
  std::vector<std::string> argv;
};

int cmd_launch(const LaunchFlags& f) {
  launch::CommandOptions o;
  o.ranks = f.ranks;
  auto tier = launch::parse_tier(f.tier);
  if (!tier) return report(tier.error());
  o.tier = *tier;
  if (!f.timeout.empty()) {
    auto d = launch::parse_job_duration_ms(f.timeout);
    if (!d) return report(Error{"--timeout: " + d.error().message, 0, kExitBadInput});
    o.timeout_ms = *d;
  }
  auto g = launch::parse_job_duration_ms(f.grace);
  if (!g) return report(Error{"--grace: " + g.error().message, 0, kExitBadInput});
  o.grace_ms = static_cast<int>(std::min<int64_t>(*g, 3'600'000));
  o.master_port = f.master_port;
  o.rendezvous_port = f.rendezvous_port;
  o.mpi = f.mpi;
  o.argv = f.argv;
  std::error_code ec;
  o.testbedctl = std::filesystem::read_symlink("/proc/self/exe", ec).string();

  // A missing mpirun is found before the lab is read (core/extras.h names its package).
  if (o.mpi)
    if (auto mpirun = launch::find_mpirun(o); !mpirun) return report(mpirun.error());
  auto st = lab::load_state(f.lab);
  if (!st) return report(Error{st.error().message, 0, kExitBadInput});
  if (st->phase != "up")
    return report(Error{"lab " + f.lab + " is " + st->phase + ", not up", 0, kExitBadInput});
  auto job = launch::prepare_command(*st, o);
  if (!job) return report(job.error());
  if (auto rc = require_root("launch")) return *rc;

  StopSignals signals;
  auto hosts = launch::command_hosts(*st, *job);
  if (!hosts) return report(hosts.error());
  job->host = hosts->me;
  auto print_line = [&](int rank, std::string_view line) {
    std::string out = report::launch_prefix(*job, rank);
    out.append(line);
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
  };
  if (hosts->idle()) {
    std::fprintf(stderr,
                 "launch %s: host %s holds none of the selected ranks (%s); nothing to do here\n",
                 f.lab.c_str(), hosts->me.c_str(), hosts->summary().c_str());
    return kExitOk;
  }
  if (hosts->joins()) {
    std::fprintf(stderr, "launch %s: host %s runs %d of %zu ranks (%s); host %s coordinates\n",
                 f.lab.c_str(), hosts->me.c_str(), hosts->local_count(), job->ranks.size(),
                 hosts->summary().c_str(), hosts->coordinator.c_str());
    auto out = launch::serve_command(
        *job, *hosts, st->digest, o, print_line,
        [&](const std::string& line) {
          std::fprintf(stderr, "launch %s: %s\n", f.lab.c_str(), line.c_str());
        },
        signals.flag());
    if (!out) return report(out.error());
    for (const auto& e : out->errors)
      std::fprintf(stderr, "launch %s: %s\n", f.lab.c_str(), e.c_str());
    std::fprintf(
        stderr,
        "launch %s: %s; the whole job's verdict and every rank's log are on host %s in %s\n",
        f.lab.c_str(), out->ok ? "done" : "FAILED", out->coordinator.c_str(),
        out->results_dir.c_str());
    if (signals.flag().load()) return 130;
    return out->ok ? kExitOk : kExitFailed;
  }
  std::fputs(report::launch_header(*job).c_str(), stderr);
  if (hosts->coordinates())
    std::fprintf(stderr,
                 "launch %s: ranks on hosts %s; this host (%s) coordinates on %s:%d and waits for "
                 "the others to join\n",
                 f.lab.c_str(), hosts->summary().c_str(), hosts->me.c_str(),
                 hosts->coordinator_addr.to_string().c_str(), o.rendezvous_port);
  std::fflush(stderr);
  auto res = hosts->coordinates() ? launch::coordinate_command(*job, *hosts, st->digest, o,
                                                               signals.flag(), print_line)
                                  : launch::run_command(*job, o, signals.flag(), print_line);
  if (!res) return report(res.error());
  std::fputs(report::launch_footer(*job, *res).c_str(), stderr);
  if (res->interrupted) return 130;
  return res->ok() ? kExitOk : kExitFailed;
}

}  // namespace

void add_launch(CLI::App& app, int& rc) {
  auto f = std::make_shared<LaunchFlags>();
  auto* l = app.add_subcommand(
      "launch", "run a program as one process per GPU, torchrun-style, or under mpirun (root)");
  l->add_option("LAB", f->lab)->required()->check(lab_name());
  l->add_option("--ranks", f->ranks, "GPUs: all, a region, a server or a GPU; ','-joined")
      ->capture_default_str();
  l->add_option("--tier", f->tier,
                "auto (NVLink in one server, else the rail in one region, else the frontend) | "
                "nvl | rail | frontend")
      ->capture_default_str()
      ->check(checked_by(launch::parse_tier, "auto|nvl|rail|frontend"));
  l->add_option("--timeout", f->timeout, "end every rank after this long (e.g. 10m)")
      ->check(job_duration());
  l->add_option("--grace", f->grace, "SIGTERM -> SIGKILL when the job ends early")
      ->capture_default_str()
      ->check(job_duration());
  l->add_option("--rendezvous-port", f->rendezvous_port,
                "a lab over several hosts: the TCP port the coordinating host listens on (its "
                "underlay address), the same on every host")
      ->capture_default_str()
      ->check(whole_in({1, 65535}));
  l->add_option("--master-port", f->master_port, "MASTER_PORT (rank 0's TCP store)")
      ->capture_default_str()
      ->check(whole_in({1, 65535}));
  l->add_flag("--mpi", f->mpi,
              "run mpirun (Open MPI) in rank 0's namespace with the GPUs as its hosts");
  l->add_option("CMD", f->argv, "command and arguments, after --")->required();
  l->callback([f, &rc] { rc = cmd_launch(*f); });
}

}  // namespace tb::cli
