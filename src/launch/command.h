// `launch`: any program (a PyTorch DDP script, an MPI program, a shell loop) as one process per
// selected GPU, each inside its GPU's namespace the way `exec` enters one (runner/exec.h
// enter_node: the namespace, a private mount namespace, the node's hosts file over /etc/hosts),
// with the environment torchrun gives its workers (RANK, LOCAL_RANK, WORLD_SIZE, ...,
// MASTER_ADDR/MASTER_PORT) and GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME naming the interface of
// the chosen tier. Each rank's stdout and stderr go through one pipe to the launcher, which
// hands every line to a callback (the verb prefixes "[rank N node]") and appends it to
// <results>/logs/rank<N>.log; job.json says what ran where and how it ended.
//
// Failure follows torchrun: the first rank that exits non-zero ends the job (SIGTERM to every
// other rank's process group, SIGKILL after the grace period); so do --timeout and a stop
// request (Ctrl-C); `down` kills the ranks by the lab's owner marker and the job ends with
// them. Every rank process carries TESTBEDCTL_OWNER=<the lab's marker> and
// TESTBEDCTL_JOB=<run id>: whatever a rank left behind (a daemon in its own session) is found
// by both and ended when the job ends — never by name.
//
// With `mpi` one process runs instead: Open MPI's mpirun in rank 0's namespace, with a hostfile
// of the selected GPUs' tier addresses and an rsh agent (a script in the results directory that
// runs `testbedctl exec LAB NODE`) so its daemons start in the right namespaces.
// Not thread-safe (forks; one job per process at a time).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "lab/state.h"

namespace tb::launch {

// The network a job's ranks talk over. kAuto: NVLink when every rank is on one server, the rail
// when they are in one region, else the frontend (VPC, transit routers, WAN).
enum class NetTier { kAuto, kNvl, kRail, kFrontend };
Result<NetTier> parse_tier(std::string_view s);  // exit-2 error naming the valid ones
const char* to_string(NetTier t);
inline constexpr const char* kTierChoices = "auto, nvl, rail or frontend";

// A job's time limit or grace: "90s", "10m", "1h", "500ms", a bare number of seconds; > 0.
Result<int64_t> parse_job_duration_ms(std::string_view text);

struct CommandOptions {
  std::string ranks = "all";  // selectors as bench's --ranks (place.h select_ranks)
  NetTier tier = NetTier::kAuto;
  int64_t timeout_ms = 0;  // 0: none
  int grace_ms = 5000;     // SIGTERM -> SIGKILL
  int master_port = 29500;
  bool mpi = false;
  std::vector<std::string> argv;  // the command; argv[0] looked up in PATH as given
  std::string testbedctl;         // this executable (the MPI rsh agent runs `exec` with it)
  std::string mpirun = "mpirun";  // looked up in PATH
  int rendezvous_port = 29411;    // a lab over several hosts: the coordinator's port
};

struct CommandRank {
  int rank = 0;
  std::string node, netns;
  int group_rank = 0;  // the server's index among the job's servers (torchrun's node rank)
  int local_rank = 0, local_world_size = 1;
  std::string addr;    // the rank's address on the tier
  std::string ifname;  // its interface on the tier
};

struct CommandJob {
  std::string lab, run_id, results_dir;
  std::string tier_requested;     // what was asked for ("auto")
  NetTier tier = NetTier::kRail;  // what it resolved to (never kAuto)
  std::string tier_note;          // why, or a caveat ("one server: frontend stays on NVLink")
  std::string ifname;             // the tier's interface, the same name in every rank
  std::string master_addr;
  int master_port = 29500;
  std::vector<std::string> argv;  // argv[0] resolved to an absolute path
  std::vector<CommandRank> ranks;
  bool mpi = false;
  std::vector<std::string> mpi_argv;  // the mpirun command line (mpi only)
  // A lab over several hosts: the host this job's processes run on (TESTBEDCTL_HOST in their
  // environment, so that what this host ends is its own even where hosts share a /proc, as
  // emulated hosts do). Not in job.json: every host writes the same job.
  std::string host;
};

// --mpi: the mpirun to run (o.mpirun, "mpirun" from PATH by default), or the exit-2 error
// naming Open MPI's Debian package (core/extras.h). The verb checks it before it reads the lab.
Result<std::string> find_mpirun(const CommandOptions& o);

// Picks the ranks and the tier and resolves the command; every error is exit 2 and names the
// field: an unknown selector, a tier the ranks cannot use (nvl across servers, rail across
// regions), a command not found (nothing is started). Reads only `lab` and the file system.
Result<CommandJob> prepare_command(const lab::LabState& lab, const CommandOptions& o);

// The variables a rank gets on top of the launcher's environment, "NAME=value" each.
std::vector<std::string> rank_environment(const CommandJob& job, int rank);

// The MPI hostfile's text and the rsh agent script (mpi jobs).
std::string mpi_hostfile(const CommandJob& job);
// The agent gives host i the TMPDIR tmp_base/i (made on first use).
std::string mpi_agent_script(const CommandJob& job, const std::string& testbedctl,
                             const std::string& tmp_base);

struct RankEnd {
  int pid = 0;
  bool exited = false;
  int code = -1;                  // exit status, 128 + signal when killed
  std::string how;                // "exit 0", "signal Terminated", "killed by testbedctl after ..."
  double start_s = 0, end_s = 0;  // seconds since the job started
};

struct CommandResult {
  std::vector<RankEnd> ranks;
  std::string reason;  // why it ended early: "rank 2 (dc/s1/g0) exit 1", "timeout 10s", ""
  bool interrupted = false;
  bool timed_out = false;
  int first_failed = -1;
  double wall_s = 0;
  // A job over several hosts: where the ranks ran ("a (2), b (2)") and what went wrong between
  // the hosts (a host gone, a file not gathered).
  std::string hosts;
  std::vector<std::string> errors;
  bool ok() const;  // every rank exited 0 and nothing ended it early
};

nlohmann::json to_json(const CommandJob& job, const CommandResult* res);

// A job over several hosts (launch/across_hosts.h): which ranks run here, and the relay's
// turn in the wait loop. Empty: every rank here, nothing relayed.
struct RemoteEnd {
  int rank = 0;
  int code = 1;
  std::string how;
};
struct CommandHooks {
  std::vector<char> local;  // per rank: runs on this host (empty: all)
  // The coordinator: other hosts' ranks end through `turn` and the job waits for them. A
  // joining host: it waits for its own ranks only.
  bool remote_ends = false;
  // Each turn: other hosts' ranks that ended and the lines they printed; `end` set asks the job
  // to end (the coordinator said so, or it is gone).
  std::function<void(std::vector<RemoteEnd>& ends, std::vector<std::pair<int, std::string>>& lines,
                     std::string& end)>
      turn;
  std::function<void(int rank, const struct RankEnd& e)> local_end;  // a rank here ended
  std::function<void(const std::string& why, int grace_ms)> ending;  // the job ends early
};

// Writes job.json and starts the ranks, then streams their output (`on_line(rank, line)`, also
// into logs/rank<N>.log) until every rank has exited; ends them early as described above. Only
// an error before any rank ran is returned as an error.
Result<CommandResult> run_command(const CommandJob& job, const CommandOptions& o,
                                  const std::atomic<bool>& stop,
                                  const std::function<void(int, std::string_view)>& on_line,
                                  const CommandHooks& hooks = {});

// Pids whose environment holds both TESTBEDCTL_OWNER=<owner> and TESTBEDCTL_JOB=<run_id> (and
// TESTBEDCTL_HOST=<host> unless `host` is "").
std::vector<int> job_processes(const std::string& owner, const std::string& run_id,
                               const std::string& host = "");

}  // namespace tb::launch
