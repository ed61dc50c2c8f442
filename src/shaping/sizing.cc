#include "shaping/sizing.h"

#include <linux/if_ether.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace tb::shaping {
namespace {

constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();

// rate (bytes/s) x time, rounded up.
uint64_t bytes_in(uint64_t rate, Duration d) {
  if (d.ns <= 0) return 0;
  const long double b = static_cast<long double>(rate) * static_cast<long double>(d.ns) / 1e9L;
  return static_cast<uint64_t>(std::ceil(std::min<long double>(b, 1.8e19L)));
}

uint32_t clamp32(uint64_t v) {
  return static_cast<uint32_t>(std::min(v, kU32Max));
}

}  // namespace

uint64_t bytes_per_second(Rate r) {
  if (!(r.bps > 0)) return 0;
  return static_cast<uint64_t>(std::llround(r.bps / 8));
}

uint32_t frame_bytes(int mtu) {
  return static_cast<uint32_t>(std::max(mtu, 0)) + ETH_HLEN;
}

uint32_t burst_bytes(const LinkShape& s) {
  const uint64_t rate = bytes_per_second(s.rate);
  if (rate == 0) return 0;
  return clamp32(std::max<uint64_t>(bytes_in(rate, kBurstTime),
                                    uint64_t{kBurstMinFrames} * frame_bytes(s.mtu)));
}

uint64_t queue_bytes(const LinkShape& s) {
  const uint64_t rate = bytes_per_second(s.rate);
  if (rate == 0) return 0;
  const Duration span{s.delay.ns + s.jitter.ns + kQueueHeadroom.ns};
  return std::max(kMinQueueBytes, bytes_in(rate, span));
}

uint32_t limit_bytes(const LinkShape& s) {
  if (s.congestion.limit > 0 && s.rate.bps > 0) return clamp32(s.congestion.limit);
  return clamp32(queue_bytes(s) + burst_bytes(s));
}

Duration queue_latency(const LinkShape& s) {
  const uint64_t rate = bytes_per_second(s.rate);
  if (rate == 0) return Duration{0};
  return Duration{static_cast<int64_t>(std::llround(static_cast<long double>(queue_bytes(s)) *
                                                    1e9L / static_cast<long double>(rate)))};
}

uint64_t delay_line_bytes(const LinkShape& s) {
  uint64_t rate = bytes_per_second(s.rate);
  if (rate == 0) rate = bytes_per_second(kHostVethRate);
  return bytes_in(rate, Duration{s.delay.ns + kJitterSpan * s.jitter.ns});
}

uint32_t netem_limit_packets(const LinkShape& s, uint64_t child_bytes) {
  const uint64_t frame = frame_bytes(s.mtu);
  const uint64_t packets = (delay_line_bytes(s) + child_bytes + frame - 1) / frame;
  return clamp32(std::max<uint64_t>(packets, kMinNetemPackets));
}

uint32_t htb_quantum(uint64_t rate, int mtu) {
  constexpr uint64_t kMaxQuantum = 200000;
  constexpr uint64_t kRate2Quantum = 10;
  return static_cast<uint32_t>(
      std::clamp<uint64_t>(rate / kRate2Quantum, frame_bytes(mtu), kMaxQuantum));
}

}  // namespace tb::shaping
