// The workload of `run`: one tb-rank per GPU iterating one collective back to back
// (workload/bench.h run_steady), watched from a thread. Resilient mode restarts the whole rank
// group when a rank fails — a transport error, a killed rank — from the first iteration not
// every rank completed, with a fresh rendezvous (as elastic training restarts its workers), so
// a fault shows as a stall instead of ending the run; each restart is a workload_restart event.
// Without it, the failure ends the workload and is reported. On a lab over several hosts
// (experiment/across_hosts.h) each host starts its own ranks (`local`); the coordinator's group
// learns the others' exits through remote_exit and reads their rows as gathered files, their
// times shifted onto its clock (set_clock_offsets). Thread-safe: the public calls are made from
// one thread, remote_exit and rank_states from another too; the watcher is internal.
#pragma once

#include <atomic>
#include <functional>
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
  SteadyWorkload(workload::Job job, std::string tb_rank, bool resilient, std::string events_path,
                 std::vector<char> local = {})
      : job_(std::move(job)),
        base_run_id_(job_.run_id),
        tb_rank_(std::move(tb_rank)),
        resilient_(resilient),
        events_(std::move(events_path)),
        local_(std::move(local)) {}
  ~SteadyWorkload();

  Status start();
  // Waits (bounded) until some rank completed `n` iterations; false if it never did.
  // `also` (when given): a second flag that ends the wait (a run cut short).
  bool wait_iterating(int64_t n, int64_t timeout_ns, const std::atomic<bool>& stop,
                      const std::atomic<bool>* also = nullptr);
  // Stops at an iteration every rank is still ahead of (`stop_iter` when given: the
  // coordinator's, on a joining host), waits for the ranks (bounded by timeout_ms + 5 s), kills
  // what is left; timeout_ms < 0: kills them at once (a run cut short). Errors: ranks that failed
  // for good. `on_stop` (when set) sees the iteration chosen before this host's ranks are told.
  void stop(int timeout_ms, std::vector<std::string>* errors, int64_t stop_iter = -1);
  void on_stop(std::function<void(int64_t)> f) { on_stop_ = std::move(f); }

  // A rank of another host ended (its host says so).
  void remote_exit(size_t rank, int code, const std::string& how);
  // Every rank's state as last seen (this host's ranks; the others as their hosts said).
  std::vector<launch::RankExit> rank_states() const;
  // Per rank: that host's CLOCK_MONOTONIC minus this one's (iterations() subtracts it).
  void set_clock_offsets(std::vector<int64_t> ns) { offsets_ = std::move(ns); }

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
  mutable std::mutex mu_;
  std::optional<launch::RankGroup> group_;
  std::thread watcher_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> restarts_{0};
  std::vector<std::string> failures_;  // why each restart happened, or the final failure
  const std::vector<char> local_;      // per rank: on this host (empty: all)
  std::vector<launch::RankExit> last_states_;
  std::vector<int64_t> offsets_;
  std::function<void(int64_t)> on_stop_;
};

}  // namespace tb::experiment
