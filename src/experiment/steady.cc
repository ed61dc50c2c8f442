#include "experiment/steady.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/events.h"
#include "launch/bench_run.h"
#include "workload/rank_main.h"

namespace tb::experiment {
namespace {

constexpr int kMaxRestarts = 5;

std::vector<nlohmann::json> rows_of(const workload::Job& job, size_t r) {
  std::vector<nlohmann::json> out;
  std::ifstream in(workload::rank_rows_path(job.results_dir, static_cast<int>(r)));
  for (std::string l; std::getline(in, l);) {
    auto j = nlohmann::json::parse(l, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

SteadyWorkload::~SteadyWorkload() {
  stopping_ = true;
  if (watcher_.joinable()) watcher_.join();
}

Status SteadyWorkload::start() {
  auto g = launch::start_ranks(job_, tb_rank_, local_);
  if (!g) return std::unexpected(g.error());
  group_.emplace(std::move(*g));
  watcher_ = std::thread([this] { watch(); });
  return {};
}

int64_t SteadyWorkload::max_iteration() const {
  int64_t m = -1;
  for (size_t r = 0; r < job_.ranks.size(); ++r)
    for (const auto& j : rows_of(job_, r))
      if (j.contains("iter")) m = std::max(m, j["iter"].get<int64_t>());
  return m;
}

int64_t SteadyWorkload::min_completed() const {
  int64_t m = INT64_MAX;
  for (size_t r = 0; r < job_.ranks.size(); ++r) {
    int64_t best = job_.start_iter - 1;
    for (const auto& j : rows_of(job_, r))
      if (j.contains("iter")) best = std::max(best, j["iter"].get<int64_t>());
    m = std::min(m, best);
  }
  return m == INT64_MAX ? -1 : m;
}

bool SteadyWorkload::wait_iterating(int64_t n, int64_t timeout_ns, const std::atomic<bool>& stop,
                                    const std::atomic<bool>* also) {
  const int64_t deadline = monotonic_ns() + timeout_ns;
  while (monotonic_ns() < deadline && !stop.load() && !(also && also->load())) {
    if (max_iteration() >= n - 1) return true;
    {
      std::lock_guard lk(mu_);
      if (!resilient_ && group_ && group_->all_exited()) return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return max_iteration() >= n - 1;
}

void SteadyWorkload::watch() {
  while (!stopping_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::unique_lock lk(mu_);
    if (!group_ || stopping_.load()) continue;
    group_->poll();
    last_states_ = group_->ranks();
    // Every rank that failed; a killed one (a signal) first: it is the cause, the others'
    // errors are its consequence.
    std::vector<std::string> failed;
    for (size_t r = 0; r < group_->ranks().size(); ++r) {
      const auto& e = group_->ranks()[r];
      if (e.running || e.code == 0) continue;
      const std::string what =
          "rank " + std::to_string(r) + " (" + job_.ranks[r].node + "): " + e.how;
      if (e.code > 128)
        failed.insert(failed.begin(), what);
      else
        failed.push_back(what);
    }
    if (failed.empty()) continue;
    const std::string why = failed.front();
    if (!resilient_ || restarts_ >= kMaxRestarts) {
      // The others fail on their own within their timeout; give them that, then end them. The
      // lock is let go while waiting: stop() (a run cut short by a lost host) and remote exits
      // take it, and had waited out the whole timeout (20 s) behind it.
      const int64_t deadline = monotonic_ns() + int64_t{job_.timeout_ms} * 1'000'000;
      while (!group_->all_exited() && monotonic_ns() < deadline && !stopping_.load()) {
        lk.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        lk.lock();
        group_->poll();
      }
      group_->kill_all(1000);
      for (size_t r = 0; r < group_->ranks().size(); ++r) {
        const auto& e = group_->ranks()[r];
        const std::string what =
            "rank " + std::to_string(r) + " (" + job_.ranks[r].node + "): " + e.how;
        if (e.code != 0 && std::find(failed.begin(), failed.end(), what) == failed.end())
          failed.push_back(what);
      }
      failures_.insert(failures_.end(), failed.begin(), failed.end());
      group_.reset();
      continue;
    }
    // Elastic restart: everyone goes, and comes back at the first iteration not all finished.
    group_->kill_all(1000);
    group_.reset();
    job_.start_iter = min_completed() + 1;
    job_.run_id = base_run_id_ + ".r" + std::to_string(++restarts_);
    (void)append_event(events_, {{"event", "workload_restart"},
                                 {"restart", restarts_.load()},
                                 {"start_iter", job_.start_iter},
                                 {"reason", why}});
    failures_.push_back("restarted after " + why);
    auto g = launch::start_ranks(job_, tb_rank_);
    if (!g) {
      failures_.push_back("restart failed: " + g.error().message);
      continue;
    }
    group_.emplace(std::move(*g));
  }
}

void SteadyWorkload::remote_exit(size_t rank, int code, const std::string& how) {
  std::lock_guard lk(mu_);
  if (group_ && rank < group_->ranks().size()) {
    group_->remote_exit(rank, code, how);
    last_states_ = group_->ranks();
  }
}

std::vector<launch::RankExit> SteadyWorkload::rank_states() const {
  std::lock_guard lk(mu_);
  return last_states_;
}

void SteadyWorkload::stop(int timeout_ms, std::vector<std::string>* errors, int64_t stop_iter) {
  stopping_ = true;  // atomic: the watcher reads it between its waits, with or without mu_
  if (watcher_.joinable()) watcher_.join();
  const int64_t at = stop_iter >= 0 ? stop_iter : max_iteration() + 3;
  if (on_stop_) on_stop_(at);
  if (auto w = write_file(workload::stop_path(job_), std::to_string(at) + "\n"); !w && errors)
    errors->push_back(w.error().message);
  if (group_) {
    const int64_t deadline =
        timeout_ms < 0 ? 0 : monotonic_ns() + int64_t{timeout_ms} * 1'000'000 + 5'000'000'000;
    auto all_exited = [&] {
      std::lock_guard lk(mu_);  // remote exits arrive from another thread
      group_->poll();
      last_states_ = group_->ranks();
      return group_->all_exited();
    };
    while (!all_exited() && monotonic_ns() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard lk(mu_);
    if (!group_->all_exited()) {
      group_->kill_all(1000);
      for (size_t r = 0; r < group_->ranks().size(); ++r)
        if (!group_->local(r) && group_->ranks()[r].running)
          group_->remote_exit(r, 128 + 9, "no exit from its host");
      last_states_ = group_->ranks();
      if (timeout_ms >= 0) errors->push_back("workload ranks did not stop; killed");
    }
    for (size_t r = 0; r < group_->ranks().size(); ++r)
      if (group_->ranks()[r].code != 0)
        errors->push_back("rank " + std::to_string(r) + " (" + job_.ranks[r].node +
                          "): " + group_->ranks()[r].how);
  }
  for (const auto& f : failures_)
    if (!f.starts_with("restarted after")) errors->push_back(f);
}

std::vector<metrics::Iteration> SteadyWorkload::iterations(uint64_t* wrong,
                                                           std::vector<std::string>* errors) const {
  std::vector<std::map<int64_t, metrics::Iteration>> per(job_.ranks.size());
  for (size_t r = 0; r < job_.ranks.size(); ++r)
    for (const auto& j : rows_of(job_, r)) {
      if (j.contains("iter")) {  // a redone iteration (after a restart) replaces the first try
        const int64_t off = r < offsets_.size() ? offsets_[r] : 0;
        per[r][j["iter"].get<int64_t>()] = {j["s"].get<int64_t>() - off,
                                            j["e"].get<int64_t>() - off};
      } else if (j.contains("wrong")) {
        *wrong += j["wrong"].get<uint64_t>();
      }
      if (j.contains("error") && !resilient_)
        errors->push_back("rank " + std::to_string(r) + " (" + job_.ranks[r].node +
                          "): " + j["error"].get<std::string>());
    }
  std::vector<metrics::Iteration> out;
  if (per.empty()) return out;
  for (const auto& [i, first] : per[0]) {
    metrics::Iteration it = first;
    bool all = true;
    for (const auto& p : per) {
      auto f = p.find(i);
      if (f == p.end()) {
        all = false;
        break;
      }
      it.start_ns = std::min(it.start_ns, f->second.start_ns);
      it.end_ns = std::max(it.end_ns, f->second.end_ns);
    }
    if (all) out.push_back(it);
  }
  return out;
}

}  // namespace tb::experiment
