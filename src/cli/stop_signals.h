// SIGINT/SIGTERM handling for verbs that run children (verify's probes, bench's ranks): while
// a StopSignals lives, those signals set a flag the verb polls, so it kills what it started
// and cleans up instead of dying with children left behind. One per process at a time.
#pragma once

#include <signal.h>

#include <atomic>

namespace tb::cli {

class StopSignals {
 public:
  StopSignals() {
    flag_store() = false;
    struct sigaction sa {};
    sa.sa_handler = [](int) { flag_store() = true; };
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  const std::atomic<bool>& flag() const { return flag_store(); }

  static std::atomic<bool>& flag_store() {
    static std::atomic<bool> stop{false};
    return stop;
  }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

inline bool stop_requested() {
  return StopSignals::flag_store().load();
}

}  // namespace tb::cli
