// The workload of `run`: one tb-rank per GPU iterating one collective back to back
// (workload/bench.h run_steady), watched from a thread. Resilient mode restarts the whole rank
// group when a rank fails — a transport error, a killed rank — from the first iteration not
// every rank completed, with a fresh rendezvous (as elastic training restarts its workers), so
// a fault shows as a stall instead of ending the run; each restart is a workload_restart event.
// Without it, the failure ends the workload and is reported. Thread-safe: the public calls
// are made from one thread; the watcher is internal.
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launch/rank_group.h"
#include "metrics/recovery.h"
#include "workload/job.h"

namespace tb::experiment {

class SteadyWorkload {
 public:
  SteadyWorkload(workload::Job job, std::string tb_rank, bool resilient, std::string events_path)
      : job_(std::move(job)),
        base_run_id_(job_.run_id),
        tb_rank_(std::move(tb_rank)),
        resilient_(resilient),
        events_(std::move(events_path)) {}
  ~SteadyWorkload();

  Status start();
  // Waits (bounded) until some rank completed `n` iterations; false if it never did.
  bool wait_iterating(int64_t n, int64_t timeout_ns, const std::atomic<bool>& stop);
  // Stops at an iteration every rank is still ahead of, waits for the ranks (bounded by
  // timeout_ms + 5 s), kills what is left. Errors: ranks that failed for good.
  void stop(int timeout_ms, std::vector<std::string>* errors);

  int restarts() const { return restarts_; }
  const workload::Job& job() const { return job_; }
  // Iterations every rank completed (by number), first start and last end over ranks.
  std::vector<metrics::Iteration> iterations(uint64_t* wrong,
                                             std::vector<std::string>* errors) const;

 private:
  void watch();
  int64_t max_iteration() const;
  int64_t min_completed() const;

  workload::Job job_;
  const std::string base_run_id_, tb_rank_;
  const bool resilient_;
  const std::string events_;
  std::mutex mu_;
  std::optional<launch::RankGroup> group_;
  std::thread watcher_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> restarts_{0};
  std::vector<std::string> failures_;  // why each restart happened, or the final failure
};

}  // namespace tb::experiment
