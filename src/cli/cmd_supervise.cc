// The lab supervisor daemon: `testbedctl supervise LAB`, started by `up`, stopped by `down`.
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apply/state.h"
#include "cli/commands.h"
#include "plan/plan.h"
#include "runner/supervisor.h"

namespace tb::cli {
namespace {

std::atomic<bool> g_stop{false};
void on_stop(int) {
  g_stop = true;
}

}  // namespace

int cmd_supervise(const std::string& lab) {
  const std::string dir = apply::lab_dir(lab);
  std::ifstream in(dir + "/supervisor-spec.json");
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return report(Error{"supervise " + lab + ": no readable spec in " + dir});
  auto specs = runner::specs_from_json(j);
  if (!specs) return report(specs.error());
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGHUP, SIG_IGN);
  std::filesystem::create_directories(dir + "/logs");
  runner::SupervisorPaths paths{dir + "/supervisor.json", dir + "/events.jsonl", dir + "/logs"};
  auto r = runner::supervise(*specs, plan::owner_marker(lab), paths, g_stop);
  if (!r) return report(r.error());
  return kExitOk;
}

}  // namespace tb::cli
