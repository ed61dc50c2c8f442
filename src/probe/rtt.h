// `tb-probe rtt`: round-trip times from numbered UDP probes to a `serve` echo. Sends `count`
// probes, one every `interval_us` on an absolute schedule (a late wake-up does not shift the
// rest), each stamped with its sequence number and send time; matches echoes by sequence
// number (duplicates and strays counted, not timed) and waits `wait_ms` after the last send
// for stragglers. Bounded by count and time: at most warmup + count x interval + wait.
// With `warmup_ms`, untimed probes go first, one every kWarmupIntervalMs until one is answered or
// warmup_ms pass: the first packets to a new neighbour wait for its address to resolve (ARP,
// retried after 1 s if a lossy link drops it), which is the host's bookkeeping, not the link.
// Not thread-safe (one run per call); blocks the caller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "probe/stats.h"

namespace tb::probe {

inline constexpr int kMaxProbeCount = 1'000'000;
inline constexpr int64_t kMaxRunSeconds = 600;
inline constexpr int kWarmupIntervalMs = 100;
inline constexpr int kMaxWarmupMs = 10'000;

struct RttOptions {
  std::string to;  // IPv4 address
  uint16_t port = 0;
  std::string dev;  // SO_BINDTODEVICE; empty = any route
  int count = 100;
  int interval_us = 1000;
  int wait_ms = 1000;
  bool samples = false;  // also print every RTT
  int dscp = 0;          // IP_TOS = dscp << 2 on the probes (a QoS class: docs/scenario.md "qos")
  int warmup_ms = 0;     // untimed probes first, until one is answered or this passes (0: none)
};

struct RttResult {
  int sent = 0;
  int received = 0;    // distinct probes answered
  int duplicates = 0;  // second and later echoes of one probe
  int strays = 0;      // datagrams that were not an echo of this run
  int send_errors = 0;
  int warmup_sent = 0;           // untimed warm-up probes (RttOptions::warmup_ms)
  bool warmup_answered = false;  // one of them was answered before the timed probes began
  std::string first_error;       // e.g. "Connection refused" (ICMP port unreachable)
  double seconds = 0;            // first send to the end of the wait
  std::vector<double> rtt_us;    // answered probes, in sequence order
  int64_t start_ns = 0;          // CLOCK_MONOTONIC of the first send
  // Runs of consecutive unanswered probes: [send time of the first lost, send time of the next
  // answered probe (or of the last send + interval)], CLOCK_MONOTONIC ns. A data-plane outage
  // on the probed path is one of these.
  std::vector<std::pair<int64_t, int64_t>> outages_ns;
  Summary summary;  // of rtt_us
};

// Bad input (exit 2) for counts, intervals or a total time out of range.
Status validate(const RttOptions& o);
Result<RttResult> run_rtt(const RttOptions& o);

nlohmann::json to_json(const RttOptions& o, const RttResult& r);
// Reads what to_json wrote (samples only when it has them).
Result<RttResult> rtt_from_json(const nlohmann::json& j);

}  // namespace tb::probe
