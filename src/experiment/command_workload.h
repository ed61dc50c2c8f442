// The workload of `run` for a [[workload]] kind = "command": any program, one process per
// selected GPU (launch/command.h run_command, on a thread), while the fault timeline fires.
// Its iterations are the lines of its output that match the workload's progress pattern: the
// k-th iteration ends when every rank that reports progress has printed its k-th such line
// (the latest of them), and starts where the one before ended (the first where the job
// started). Without a pattern the whole job is one iteration. At the end of the run the job is
// ended as Ctrl-C ends `launch` (SIGTERM, SIGKILL after the grace), unless it ended before.
// Thread-safe: the public calls are made from one thread; the job's thread is internal.
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "launch/command.h"
#include "metrics/recovery.h"

namespace tb::experiment {

// Iterations from progress lines: `marks[r]` holds when rank r printed each matching line; ranks
// with none take no part. Iteration k ends at the latest k-th mark and starts where k-1 ended
// (the first at `start_ns`); as many as every taking part has. Pure.
std::vector<metrics::Iteration> progress_iterations(const std::vector<std::vector<int64_t>>& marks,
                                                    int64_t start_ns);

class CommandWorkload {
 public:
  CommandWorkload(launch::CommandJob job, launch::CommandOptions o, const std::string& progress);
  ~CommandWorkload();
  CommandWorkload(const CommandWorkload&) = delete;
  CommandWorkload& operator=(const CommandWorkload&) = delete;

  void start();
  // Waits (bounded) until `n` iterations completed or the job ended; false if not n.
  bool wait_iterating(size_t n, int64_t timeout_ns, const std::atomic<bool>& stop);
  // Ends the job if it still runs; a job that failed on its own (or could not start) adds its
  // reason to `errors`. `early`, when the job had ended by itself before this call.
  void stop(std::vector<std::string>* errors, bool* early = nullptr);
  std::vector<metrics::Iteration> iterations() const;
  const launch::CommandJob& job() const { return job_; }

 private:
  void on_line(int rank, std::string_view line);

  const launch::CommandJob job_;
  const launch::CommandOptions o_;
  const bool has_pattern_;
  const std::regex pattern_;
  mutable std::mutex mu_;
  std::vector<std::vector<int64_t>> marks_;  // per rank: when each progress line came
  int64_t started_ns_ = 0, ended_ns_ = 0;
  std::optional<Result<launch::CommandResult>> result_;
  std::atomic<bool> stop_{false}, done_{false};
  std::thread thread_;
};

}  // namespace tb::experiment
