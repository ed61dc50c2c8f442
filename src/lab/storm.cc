#include "lab/storm.h"

#include <signal.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "congestion/control.h"
#include "congestion/stats.h"
#include "lab/state.h"
#include "runner/supervisor.h"

namespace tb::lab {
namespace {

constexpr int kAnswerWaitMs = 5000;

// The congestion agent's pid when it runs or starts (0 otherwise), from the supervisor's status.
int agent_pid(const std::string& dir, const std::string& lab) {
  std::ifstream in(dir + "/supervisor.json");
  for (const auto& c : runner::states_from_json(nlohmann::json::parse(in, nullptr, false)))
    if (c.name == "congestion " + lab && (c.running || c.starting)) return c.pid;
  return 0;
}

}  // namespace

Result<int64_t> set_storms(const std::string& lab, const std::vector<std::string>& ports, bool on) {
  auto dir = open_lab_dir(lab);
  if (!dir) return std::unexpected(dir.error());
  auto stages = dir->sub("stages");
  if (!stages) return std::unexpected(stages.error());
  const int pid = agent_pid(dir->path(), lab);
  if (pid <= 0)
    return fail("lab " + lab + " has no congestion agent running (`status` lists it as " +
                "\"congestion " + lab + "\"; see " + dir->path() + "/logs); a pfc-storm needs " +
                "the agent of its lossless rails");
  auto doc = congestion::read_control(stages->path() + "/" + congestion::kControlFile);
  if (!doc) return std::unexpected(doc.error());
  const congestion::ControlDoc next = congestion::with_storms(*doc, ports, on);
  TB_TRY(stages->write(congestion::kControlFile, congestion::to_json(next).dump(1) + "\n"));
  if (::kill(pid, SIGHUP) != 0) return sys_fail("tell the congestion agent of lab " + lab);
  const std::string stats = stages->path() + "/" + congestion::kStatsFile;
  for (int i = 0; i < kAnswerWaitMs / 5; ++i) {
    if (const auto s = congestion::read_stats(stats);
        s && s->generation == next.generation && s->control_applied_ns > 0) {
      if (!s->control_error.empty())
        return fail("the congestion agent of lab " + lab +
                    " refused part of it: " + s->control_error);
      return s->control_applied_ns;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return fail("the congestion agent of lab " + lab + " did not answer within " +
              std::to_string(kAnswerWaitMs / 1000) + " s (see " + dir->path() + "/logs)");
}

}  // namespace tb::lab
