// The lab supervisor daemon: `testbedctl supervise LAB`, started by `up`, stopped by `down`.
// SIGHUP makes it re-read its spec and start children it does not run yet.
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/flag_checks.h"
#include "core/realtime.h"
#include "lab/state.h"
#include "plan/plan.h"
#include "runner/supervisor.h"
#include "stage/main/delayd_main.h"

namespace tb::cli {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};
void on_stop(int) {
  g_stop = true;
}
void on_reload(int) {
  g_reload = true;
}

Result<std::vector<runner::ChildSpec>> read_specs(const std::string& dir) {
  std::ifstream in(dir + "/supervisor-spec.json");
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return fail("no readable spec in " + dir);
  return runner::specs_from_json(j);
}

int cmd_supervise(const std::string& lab) {
  const std::string dir = lab::lab_dir(lab);
  auto specs = read_specs(dir);
  if (!specs) return report(with_context(specs.error(), "supervise " + lab));
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  struct sigaction hup {};
  hup.sa_handler = on_reload;
  sigemptyset(&hup.sa_mask);
  sigaction(SIGHUP, &hup, nullptr);
  // Its pid, for `link set` to send SIGHUP after adding a child to the spec.
  auto lab_files = lab::open_lab_dir(lab);
  if (!lab_files) return report(lab_files.error());
  if (auto w = lab_files->write("supervisor.pid", std::to_string(::getpid()) + "\n"); !w)
    return report(w.error());
  if (auto logs = lab_files->sub("logs"); !logs) return report(logs.error());
  runner::SupervisorPaths paths{dir + "/supervisor.json", dir + "/events.jsonl", dir + "/logs"};
  // One step above the delay stages (SCHED_FIFO kRealtimePriority, core/realtime.h) where the
  // host allows it: the stages started first calibrate at real-time priority and, on 2 cores,
  // kept the supervisor from starting the next one (their `started` events 10 ms apart for a
  // 64-GPU lab). SCHED_RESET_ON_FORK: every child starts at SCHED_OTHER and a stage raises
  // itself. The supervisor sleeps between short turns, so it takes no time from them.
  sched_param rt{};
  rt.sched_priority = kRealtimePriority + 1;
  (void)::sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &rt);
  // A lab's delay stages run tb-delayd's main in a fork of this process, not an exec of the
  // program (runner/supervisor.h ChildSpec::in_process; lab/daemons.cc says which stages).
  auto stage_main = [](const std::vector<std::string>& argv, int ready_fd) {
    if (std::filesystem::path(argv.at(0)).filename() != "tb-delayd") {
      std::fprintf(stderr, "supervise: %s cannot run in process\n", argv[0].c_str());
      return 127;
    }
    std::vector<char*> c_argv;
    for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
    c_argv.push_back(nullptr);
    return delayd_main(static_cast<int>(argv.size()), c_argv.data(), ready_fd);
  };
  auto r = runner::supervise(
      *specs, plan::owner_marker(lab), paths, g_stop, &g_reload,
      [&] {
        auto again = read_specs(dir);
        return again ? *again : std::vector<runner::ChildSpec>{};
      },
      stage_main);
  if (!r) return report(r.error());
  return kExitOk;
}

}  // namespace

void add_supervise(CLI::App& app, int& rc) {
  auto lab = std::make_shared<std::string>();
  auto* supervise = app.add_subcommand("supervise", "");  // internal: started by up
  supervise->add_option("LAB", *lab)->required()->check(lab_name());
  supervise->group("");
  supervise->callback([lab, &rc] { rc = cmd_supervise(*lab); });
}

}  // namespace tb::cli
