// The one monotonic clock every analysis uses (CLOCK_MONOTONIC, ns): the event log's stamps,
// the delay stage's deadlines, a bench's iteration times and the host sampler's windows. Inline:
// the delay stage reads it per packet.
#pragma once

#include <time.h>

#include <cstdint>

namespace tb {

inline int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace tb
