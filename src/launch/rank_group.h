// RankGroup: a fixed set of worker processes, one per rank, each started inside its node's
// namespace (fork -> setns -> exec, see spawn_in_netns) with the lab's owner marker in its
// environment, so `down`/`clean` kill them with the lab. Unlike the supervisor nothing is
// restarted: a rank that dies is a result. The destructor kills and reaps whatever still runs.
// Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"

namespace tb::launch {

struct RankProc {
  std::string netns;
  std::vector<std::string> argv;  // argv[0] an absolute path
  std::string log_path;
};

struct RankExit {
  bool running = true;
  int pid = 0;
  int code = -1;    // exit code, or 128 + signal
  std::string how;  // "exit 1", "signal Killed"
};

class RankGroup {
 public:
  // Starts every process; if one cannot start, those started are killed and the error returned.
  static Result<RankGroup> start(const std::vector<RankProc>& procs, const std::string& owner);
  RankGroup(RankGroup&&) noexcept = default;
  RankGroup& operator=(RankGroup&&) noexcept = default;
  ~RankGroup();

  // Reaps exited ranks without blocking; true when something changed.
  bool poll();
  const std::vector<RankExit>& ranks() const { return ranks_; }
  bool all_exited() const;
  // SIGTERM the running ones, wait up to grace_ms, SIGKILL, reap.
  void kill_all(int grace_ms);

 private:
  RankGroup() = default;
  std::vector<RankExit> ranks_;
};

}  // namespace tb::launch
