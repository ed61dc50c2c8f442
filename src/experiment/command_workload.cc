#include "experiment/command_workload.h"

#include <algorithm>
#include <chrono>

#include "core/events.h"

namespace tb::experiment {

CommandWorkload::CommandWorkload(launch::CommandJob job, launch::CommandOptions o,
                                 const std::string& progress)
    : job_(std::move(job)),
      o_(std::move(o)),
      has_pattern_(!progress.empty()),
      pattern_(progress.empty() ? std::string(".") : progress),
      marks_(job_.ranks.size()) {}

CommandWorkload::~CommandWorkload() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void CommandWorkload::on_line(int rank, std::string_view line) {
  if (!has_pattern_) return;
  const int64_t t = monotonic_ns();
  if (!std::regex_search(line.begin(), line.end(), pattern_)) return;
  std::lock_guard lk(mu_);
  if (static_cast<size_t>(rank) < marks_.size()) marks_[static_cast<size_t>(rank)].push_back(t);
}

void CommandWorkload::start() {
  started_ns_ = monotonic_ns();
  thread_ = std::thread([this] {
    auto r = launch::run_command(job_, o_, stop_,
                                 [this](int rank, std::string_view l) { on_line(rank, l); });
    std::lock_guard lk(mu_);
    ended_ns_ = monotonic_ns();
    result_ = std::move(r);
    done_ = true;
  });
}

bool CommandWorkload::wait_iterating(size_t n, int64_t timeout_ns, const std::atomic<bool>& stop) {
  const int64_t deadline = monotonic_ns() + timeout_ns;
  while (monotonic_ns() < deadline && !stop.load() && !done_.load()) {
    if (iterations().size() >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return iterations().size() >= n;
}

void CommandWorkload::stop(std::vector<std::string>* errors, bool* early) {
  if (early) *early = done_.load();
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  std::lock_guard lk(mu_);
  if (!result_ || !errors) return;
  if (!*result_) {
    errors->push_back("command workload: " + result_->error().message);
    return;
  }
  const auto& r = **result_;
  if (!r.ok() && !r.interrupted)
    errors->push_back("command workload: " +
                      (r.reason.empty() ? std::string("a rank exited non-zero") : r.reason) +
                      "; logs in " + job_.results_dir + "/logs");
}

std::vector<metrics::Iteration> CommandWorkload::iterations() const {
  std::lock_guard lk(mu_);
  std::vector<metrics::Iteration> out;
  if (!has_pattern_) {
    if (done_.load() && ended_ns_ > 0) out.push_back({started_ns_, ended_ns_});
    return out;
  }
  return progress_iterations(marks_, started_ns_);
}

std::vector<metrics::Iteration> progress_iterations(const std::vector<std::vector<int64_t>>& marks,
                                                    int64_t start_ns) {
  std::vector<metrics::Iteration> out;
  size_t n = SIZE_MAX;
  bool any = false;
  for (const auto& m : marks)
    if (!m.empty()) {
      any = true;
      n = std::min(n, m.size());
    }
  if (!any) return out;
  int64_t prev = start_ns;
  for (size_t k = 0; k < n; ++k) {
    int64_t end = 0;
    for (const auto& m : marks)
      if (!m.empty()) end = std::max(end, m[k]);
    out.push_back({prev, end});
    prev = end;
  }
  return out;
}

}  // namespace tb::experiment
