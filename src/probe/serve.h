// `tb-probe serve`: the far end of a measurement. One process, one thread, one poll loop:
//   - a UDP echo on PORT that sends every datagram back unchanged to its sender, from the
//     address it was sent to and out of the interface it came in on;
//   - a TCP sink on PORT that, per connection, reads the sender's hello (packet.h), counts
//     payload bytes with first-byte, warm-up-mark and last-byte times on CLOCK_MONOTONIC, and
//     after the sender's FIN writes its report back.
// Both sockets are bound to `dev` when given (for a bridge port: the bridge), and the sink's
// SO_RCVBUF is set before listen() so accepted connections inherit it and the window scale
// covers it. Runs until `seconds` pass or `stop` is set (SIGTERM). Not thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"

namespace tb::probe {

inline constexpr int kMaxServeSeconds = 3600;

struct ServeOptions {
  uint16_t port = 0;
  std::string dev;
  std::string addr = "0.0.0.0";
  int seconds = 60;
  uint64_t buffer = 0;  // SO_RCVBUF of the sink; 0 = autotuning (net.ipv4.tcp_rmem)
  int dscp = 0;         // IP_TOS = dscp << 2 on the echoes and the sink's ACKs
};

struct ServeStats {
  uint64_t echoed = 0;
  uint64_t tcp_sessions = 0;
  uint64_t tcp_bytes = 0;
};

Status validate(const ServeOptions& o);
// `emit` gets {"event":"ready",...} once both sockets listen; the stats come back at the end.
Result<ServeStats> serve(const ServeOptions& o, const std::atomic<bool>& stop,
                         const std::function<void(const nlohmann::json&)>& emit);

}  // namespace tb::probe
