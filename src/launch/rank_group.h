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
  // A rank on another host of the lab (issue 19): not started here; its exit arrives from that
  // host (remote_exit).
  bool remote = false;
};

struct RankExit {
  bool running = true;
  int pid = 0;      // 0: a remote rank
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
  // SIGTERM the running ones on this host, wait up to grace_ms, SIGKILL, reap. Remote ranks are
  // their host's to kill.
  void kill_all(int grace_ms);
  // A remote rank ended (as its host says), or its host is gone.
  void remote_exit(size_t rank, int code, const std::string& how);
  bool local(size_t rank) const { return ranks_[rank].pid != 0; }

 private:
  RankGroup() = default;
  std::vector<RankExit> ranks_;
};

}  // namespace tb::launch
