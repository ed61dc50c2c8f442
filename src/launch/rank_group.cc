#include "launch/rank_group.h"

#include <sys/wait.h>

#include <algorithm>

#include "core/process.h"
#include "runner/supervisor.h"

namespace tb::launch {
using tb::runner::describe_exit;
using tb::runner::spawn_in_netns;

Result<RankGroup> RankGroup::start(const std::vector<RankProc>& procs, const std::string& owner) {
  RankGroup g;
  for (size_t i = 0; i < procs.size(); ++i) {
    if (procs[i].remote) {
      g.ranks_.push_back(RankExit{true, 0, -1, ""});
      continue;
    }
    auto pid = spawn_in_netns(procs[i].netns, procs[i].argv, owner, procs[i].log_path);
    if (!pid) {
      g.kill_all(1000);
      return std::unexpected(with_context(pid.error(), "start rank " + std::to_string(i)));
    }
    g.ranks_.push_back(RankExit{true, *pid, -1, ""});
  }
  return g;
}

RankGroup::~RankGroup() {
  kill_all(1000);
}

bool RankGroup::poll() {
  bool changed = false;
  for (auto& r : ranks_) {
    if (!r.running || r.pid == 0) continue;
    int status = 0;
    const pid_t p = ::waitpid(r.pid, &status, WNOHANG);
    if (p != r.pid) continue;
    r.running = false;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.how = describe_exit(status);
    changed = true;
  }
  return changed;
}

bool RankGroup::all_exited() const {
  return std::none_of(ranks_.begin(), ranks_.end(), [](const RankExit& r) { return r.running; });
}

void RankGroup::kill_all(int grace_ms) {
  poll();
  std::vector<int> pids;
  for (const auto& r : ranks_)
    if (r.running && r.pid != 0) pids.push_back(r.pid);
  if (pids.empty()) return;
  terminate(pids, grace_ms);  // reaps our children
  for (auto& r : ranks_)
    if (r.running && r.pid != 0) {
      r.running = false;
      r.code = 128 + 15;
      r.how = "killed by testbedctl";
    }
}

void RankGroup::remote_exit(size_t rank, int code, const std::string& how) {
  if (rank >= ranks_.size() || ranks_[rank].pid != 0 || !ranks_[rank].running) return;
  ranks_[rank].running = false;
  ranks_[rank].code = code;
  ranks_[rank].how = how;
}

}  // namespace tb::launch
