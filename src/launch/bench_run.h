// Running a bench on a live lab: pick the ranks, write job.json into a fresh results
// directory (<results root>/<lab>/<run id>/, root from TESTBEDCTL_RESULTS_DIR or
// /var/lib/testbedctl/results), start one tb-rank per GPU in its namespace, stream rows as
// soon as every rank has finished a size, and collect each rank's exit. When a rank fails,
// the others must fail on their own (their peers' connections close, or their timeout
// passes); after that timeout plus a grace they are killed. Logs: <run>/logs/rank<R>.log.
// Not thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "collective/progress.h"
#include "lab/state.h"
#include "launch/rank_group.h"
#include "multihost/session.h"
#include "workload/bench_result.h"
#include "workload/job.h"
#include "workload/transport.h"

namespace tb::launch {

struct BenchOptions {
  std::string ranks = "all";
  // "auto": NVLink in a server, the rail across servers, the WAN across regions; "frontend":
  // pairs on two servers of a region over the frontend (VPC) instead (place.h).
  std::string tier = "auto";
  workload::ImplKind impl = workload::ImplKind::kNative;
  int timeout_ms = 30000;
  // --transport (native: rdma = the rail pairs over RDMA verbs), its tunables, --channels.
  workload::TransportOptions transport;
  workload::BenchSpec spec;
  std::string tb_rank;  // path of the tb-rank executable
  // A lab over several hosts: the coordinator's TCP port (launch/across_hosts.h).
  int rendezvous_port = multihost::kDefaultPort;
};

// bench's own limit on a run: it is cut when, for `limit`, no rank wrote a line (a row, its
// ready line) and no rank of the communicator moved a byte (the progress board the native
// transports write, collective/progress.h). A slow run whose sizes take longer than the limit
// is not cut while its bytes move (40-48 ranks over the net under load reached 120 s).
class IdleWatch {
 public:
  using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC, the board's clock
  // `board_path`: the run's board (progress_board_path); "" or unreadable: rank lines only.
  IdleWatch(std::chrono::milliseconds limit, const std::string& board_path, int ranks);
  ~IdleWatch();
  void reported(Clock::time_point now = Clock::now());  // a rank wrote something
  // The limit passed with neither lines nor progress.
  bool expired(Clock::time_point now = Clock::now());
  std::chrono::milliseconds limit() const { return limit_; }

 private:
  std::chrono::milliseconds limit_;
  Clock::time_point last_;
  std::unique_ptr<collective::ProgressBoard> board_;
};

// Where the ranks of `job` keep their progress board (in the rendezvous store, named by the
// run: workload/rank_main.cc's key prefix).
std::string progress_board_path(const workload::Job& job);

std::string results_root();
// `dir`, a results directory below results_root() (<root>/<lab>/<run id>[/workload]), made
// where missing: the root walked as a root, every directory below it never a symlink, owned by
// root or this user and writable by no one else (core/safe_file.h).
Result<SafeDir> open_results_dir(const std::string& dir);

// The options alone, before any lab is looked up: the bench spec's and the transport's ranges,
// the timeout, a negative -r/--root, what Gloo cannot do, RDMA tunables on a tcp run -> exit 2
// errors naming the flag.
Status check_options(const BenchOptions& o);

// Checks the options (check_options) and them against the lab (ranks, root, algorithm where
// knowable, RDMA on the rail for
// --transport rdma) -> exit 2 errors. Pure: reads nothing but `lab`.
Result<workload::Job> prepare_job(const lab::LabState& lab, const BenchOptions& o);

// Writes job.json (and the results and store directories) and starts one tb-rank per rank;
// with `local` (per rank, a job over several hosts) only the ranks of this host.
Result<launch::RankGroup> start_ranks(const workload::Job& job, const std::string& tb_rank,
                                      const std::vector<char>& local = {});

// Starts the ranks and waits for them. A job over several hosts (launch/across_hosts.h): this
// host coordinates — the other hosts join first, their ranks' rows and exits arrive through
// them (a host that runs no rank, or joins, calls serve_job instead). `on_row` sees each finished
// size; `on_start` the result skeleton (ranks, algorithm) once every rank has joined. `stop`
// (SIGINT) kills them. The caller shows the rows (the verb hands in report/bench.h's formatters;
// launch/ never includes report/) and writes bench.json into the results directory.
Result<workload::BenchResult> run_job(
    const workload::Job& job, const lab::LabState& lab, const BenchOptions& o,
    const std::function<void(const workload::BenchResult&)>& on_start,
    const std::function<void(const workload::BenchResult&, const workload::BenchRow&)>& on_row,
    const std::atomic<bool>& stop);

}  // namespace tb::launch
