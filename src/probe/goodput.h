// `tb-probe goodput`: a bulk TCP transfer to a `serve` sink, counted by the receiver. The
// sender writes for `seconds`, half-closes, and waits for the receiver's report (packet.h):
// the bytes it received and over how long, both in total and after the warm-up (slow start)
// the sender asked for. Goodput is measured-window bytes x 8 / measured-window seconds as the
// receiver saw them, so data still queued when the sender stops counts at the rate it
// actually crossed the link. Bounded: connect 3 s, send `seconds`, drain `drain_ms`.
// Not thread-safe (one run per call); blocks the caller.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "probe/packet.h"

namespace tb::probe {
// tb-probe's exit status when a step ran out of time (an error with ETIMEDOUT: the receiver's
// report never came): verify tells a timeout on a stalled host from a broken link by it.
inline constexpr int kExitTimedOut = 3;
}  // namespace tb::probe

namespace tb::probe {

struct GoodputOptions {
  std::string to;
  uint16_t port = 0;
  std::string dev;
  double seconds = 5;
  int warmup_ms = 1000;
  uint64_t buffer = 0;  // SO_SNDBUF; 0 = the kernel's autotuning (net.ipv4.tcp_wmem)
  int drain_ms = 15000;
  // SO_MAX_PACING_RATE in bit/s (0 = none): TCP's own pacing holds the transfer below a link's
  // rate, so no queue fills and every retransmission is a loss the link made (verify's TCP loss
  // check); it also keeps GSO super-packets to ~1 ms of data at this rate (tcp_tso_autosize).
  uint64_t pace_bps = 0;
  int dscp = 0;  // IP_TOS = dscp << 2 on the transfer (a QoS class: docs/scenario.md "qos")
};

struct GoodputResult {
  uint64_t sent_bytes = 0;
  double send_seconds = 0;
  GoodputReport receiver;
  bool confirmed = false;      // the receiver counted every byte we sent
  double goodput_bps = 0;      // receiver's measured window (whole transfer if it has none)
  int mss = 0;                 // tcpi_snd_mss
  bool timestamps = false;     // TCP timestamps negotiated (12 bytes of every segment)
  uint32_t retransmits = 0;    // tcpi_total_retrans: segments sent again
  uint64_t data_segs_out = 0;  // tcpi_data_segs_out: data segments sent, retransmits included
  double tcp_rtt_us = 0;       // the kernel's smoothed RTT at the end
  int sndbuf = 0;              // as the kernel reports it (doubled, see socket(7))
};

Status validate(const GoodputOptions& o);
Result<GoodputResult> run_goodput(const GoodputOptions& o);

nlohmann::json to_json(const GoodputOptions& o, const GoodputResult& r);
Result<GoodputResult> goodput_from_json(const nlohmann::json& j);

}  // namespace tb::probe
