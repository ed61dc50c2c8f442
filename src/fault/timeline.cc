#include "fault/timeline.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/events.h"

namespace tb::fault {

Status run_timeline(Injector& injector, const std::vector<Resolved>& faults,
                    const std::vector<Step>& steps, int64_t t0_ns, const std::atomic<bool>& stop,
                    const std::function<void(const Step&, const Status&)>& on_step, AtEnd at_end) {
  Status first;
  // A revert is due its fault's duration after the inject took effect, not only after the inject
  // was due: an inject in force a few ms late (an nft rule's commit) must still hold its `for`.
  std::vector<int64_t> inject_at(faults.size(), 0), inject_effect(faults.size(), 0);
  for (const auto& s : steps) {
    int64_t due = t0_ns + s.at_ns;
    if (!s.inject && inject_effect[s.fault] > 0)
      due = std::max(due, inject_effect[s.fault] + (s.at_ns - inject_at[s.fault]));
    // Sleep in short slices so a stop is noticed within 20 ms.
    while (!stop.load()) {
      const int64_t left = due - monotonic_ns();
      if (left <= 0) break;
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(left, 20'000'000)));
    }
    if (stop.load()) break;
    auto st = injector.apply(faults[s.fault], s);
    if (s.inject) {
      inject_at[s.fault] = s.at_ns;
      inject_effect[s.fault] = injector.last_effective_ns();
    }
    if (on_step) on_step(s, st);
    if (!st && first) first = st;
  }
  if (at_end == AtEnd::kKeepLasting && !stop.load()) injector.keep_lasting(faults);
  injector.revert_all(faults);
  return first;
}

}  // namespace tb::fault
