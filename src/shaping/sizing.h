// Sizing: token-bucket bursts and queue limits for a LinkShape, from the rate and the
// bandwidth-delay product (never a fixed packet count). Every backend sizes through here so
// that tbf, netem and htb agree on what "the link's buffer" is.
//
// Units: rates in bytes per second, sizes in bytes, as the kernel takes them.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "core/units.h"
#include "shaping/link_shape.h"

namespace tb::shaping {

// The bucket holds at least 1 ms of traffic at the rate. HTB's tc-default burst (about one MTU
// of tokens) lost ~7% of the rate at 5 Gbit/s on the reference host, beyond header overhead;
// TBF with a burst of max(64 KB, rate x 1 ms) kept 0.937 (research/limits.md section 3:
// "set burst/cburst ~ rate x 1 ms").
inline constexpr Duration kBurstTime{1'000'000};
// ...and at least two full frames, so a frame never waits for tokens it could never collect
// (sch_tbf.c warns when the burst is below the device MTU) and back-to-back frames pass at low
// rates. A GSO packet larger than the burst is split by tbf (tbf_segment), not dropped.
// Above about 525 Mbit/s the 1 ms bucket exceeds a 64 KB GSO packet, which then leaves whole
// (up to 45 frames back to back at host speed). That is kept on purpose (docs/scenario.md): a
// bucket below one GSO packet cost 16% of the goodput at 1 Gbit/s and 50% at 5 Gbit/s on the
// reference host, and a one-frame peak bucket forcing the split 66-73% at 1 Gbit/s.
inline constexpr uint32_t kBurstMinFrames = 2;

// The emulated buffer holds the link's own delay (plus jitter) worth of traffic and this much
// more: enough for a TCP flow to keep the link busy across the reverse path and the host's
// scheduling noise (+2 to +2.7 ms of RTT at saturation on the 2-vCPU reference host,
// research/limits.md section 4b), while bounding queueing delay: unbounded pfifo queues gave
// 35 ms average / 200 ms peak at 10 Mbit (section 3).
inline constexpr Duration kQueueHeadroom{5'000'000};
// Smallest buffer: one 64 KiB GSO packet, so a lone full-size packet always fits.
inline constexpr uint64_t kMinQueueBytes = 64 * 1024;

// netem's limit counts packets; below its own default (iproute2 tc/q_netem.c opt.limit = 1000)
// we would only add drops.
inline constexpr uint32_t kMinNetemPackets = 1000;
// Jitter tables stop at 4 standard deviations (int16 entries scaled by NETEM_DIST_SCALE 8192),
// so no packet is held longer than delay + 4 x jitter.
inline constexpr int kJitterSpan = 4;

// netem's own rate, set only so that netem keeps packets in order (backend_netem.cc): 1 TB/s
// (8 Tbit/s), 400 times kHostVethRate; a 64 KB GSO packet costs it 65 ns.
inline constexpr uint64_t kOrderingRate = 1'000'000'000'000;

// Bytes per second for a rate in bits per second, rounded; 0 stays 0.
uint64_t bytes_per_second(Rate r);
// A full frame as a qdisc counts it: MTU plus the Ethernet header (qdisc_pkt_len includes the
// link-layer header; include/uapi/linux/if_ether.h ETH_HLEN = 14).
uint32_t frame_bytes(int mtu);

// max(rate x kBurstTime, kBurstMinFrames frames). 0 for an unlimited rate.
uint32_t burst_bytes(const LinkShape& s);
// The bottleneck buffer: max(kMinQueueBytes, rate x (delay + jitter + kQueueHeadroom)).
// 0 for an unlimited rate (nothing queues behind a rate limit that is not there).
uint64_t queue_bytes(const LinkShape& s);
// A tbf/bfifo limit: buffer plus one burst, as iproute2 derives it from a latency
// (tc/q_tbf.c: limit = rate x latency + burst); a lossless queue's own limit instead
// (LinkShape::congestion, plan/congestion.h). Clamped to 32 bits.
uint32_t limit_bytes(const LinkShape& s);
// An HTB class's quantum for `rate` bytes per second: rate / r2q (10), at least one frame of
// `mtu`, at most 200000 bytes. HTB warns when a class's quantum is outside 1000..200000 bytes
// and the kernel derived it (sch_htb.c htb_change_class, "quantum of class %X is small/big");
// we set it from the same rule, bounded, so a lone class never warns.
uint32_t htb_quantum(uint64_t rate, int mtu);
// How long a full buffer takes to drain at the rate (what tc prints as tbf's "lat").
Duration queue_latency(const LinkShape& s);

// Bytes a delay line holds: rate x (delay + kJitterSpan x jitter); an unlimited link is counted
// at the host's veth rate (link_shape.h kHostVethRate).
uint64_t delay_line_bytes(const LinkShape& s);
// netem's packet limit when it holds the delay line and feeds a child queue of `child_bytes`:
// both counted in full frames, never below kMinNetemPackets.
uint32_t netem_limit_packets(const LinkShape& s, uint64_t child_bytes);

}  // namespace tb::shaping
