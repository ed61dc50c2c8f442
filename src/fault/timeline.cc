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
  for (const auto& s : steps) {
    // Sleep in short slices so a stop is noticed within 20 ms.
    while (!stop.load()) {
      const int64_t left = t0_ns + s.at_ns - monotonic_ns();
      if (left <= 0) break;
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(left, 20'000'000)));
    }
    if (stop.load()) break;
    auto st = injector.apply(faults[s.fault], s);
    if (on_step) on_step(s, st);
    if (!st && first) first = st;
  }
  if (at_end == AtEnd::kKeepLasting && !stop.load()) injector.keep_lasting(faults);
  injector.revert_all(faults);
  return first;
}

}  // namespace tb::fault
