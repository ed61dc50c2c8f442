// QueueSpec: what one delay-stage queue does (one queue per link direction), how it is written on
// tb-delayd's command line and in its config file, and how long its queue must be.
//
// Text form, one queue: "NUM:key=value:key=value", keys
//   delay_us / delay_ns / delay (a duration, "25ms")   one-way delay added to every packet
//   jitter_us / jitter_ns / jitter                      standard deviation of that delay
//   maxlen                                              packets the queue may hold (default 1024)
//   mark                                                ECN: mark ECT packets CE with the
//                                                       probability in this mark table slot
//                                                       (mark_table.h); the queue then copies
//                                                       whole packets, one segment at a time
// e.g. "10:delay_us=25000:jitter_us=1000:maxlen=65536". A config file holds one per line; blank
// lines and lines starting with '#' are skipped, except "# generation N": the number of the
// change that wrote the file, which the stage reports back with the result of reading it
// (stage.h), so whoever wrote it knows when and how its change was taken.
//
// Pure functions over plain values; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/units.h"

namespace tb::stage {

// The kernel's default NFQUEUE length (NFQNL_QMAX_DEFAULT, net/netfilter/nfnetlink_queue.c); also
// the floor queue_maxlen_for() never goes below.
inline constexpr uint32_t kDefaultMaxlen = 1024;
// Upper bound we accept for maxlen: 16 Mi packets (the stage keeps 16 bytes per slot).
inline constexpr uint32_t kMaxMaxlen = 1u << 24;
// Slots in a host's mark table (mark_table.h): one per ecn switch port of the host.
inline constexpr uint32_t kMarkSlots = 4096;

struct QueueSpec {
  uint16_t num = 0;  // NFQUEUE number, as in `iptables -j NFQUEUE --queue-num NUM`
  Duration delay;    // added one-way delay
  Duration jitter;   // standard deviation of the delay (deadlines stay in order regardless)
  uint32_t maxlen = kDefaultMaxlen;  // packets held at most; more are dropped by the kernel
  int mark = -1;  // ECN: the mark table slot whose probability marks ECT packets; -1 = none
  friend bool operator==(const QueueSpec&, const QueueSpec&) = default;
};

// "10:delay_us=25000:jitter_us=1000:maxlen=65536" (delay_ns/jitter_ns when not whole µs).
std::string to_arg(const QueueSpec& spec);
// The inverse; errors (exit code 2) name the text and the key at fault.
Result<QueueSpec> parse_queue_spec(std::string_view text);
// A config file's text: one spec per line. Errors say "line N: ...". Duplicate queue numbers
// are an error.
Result<std::vector<QueueSpec>> parse_queue_config(std::string_view text);
// The text parse_queue_config reads back, one to_arg() per line, after "# generation N" when
// `generation` is not 0.
std::string to_config(const std::vector<QueueSpec>& specs, uint64_t generation = 0);
// N of a config text's first "# generation N" line; 0 when it has none. Read apart from the
// queues, so a config that does not parse still says which change it was.
uint64_t config_generation(std::string_view text);

// How many packets a queue delaying `delay` on a link of `rate` must hold, so the kernel never
// drops for lack of room. Packets in flight = packets/s x delay; packets/s is bounded
//  - by rate / kMinPacketBytes (64 B frames: ACKs, small RPCs), but small-packet rates are also
//    capped by what one stage process can move (kStagePpsCeiling, research/limits.md 4c), and
//  - from below by rate / mtu, so bulk traffic at the full link rate always fits even without
//    GSO. With NFQA_CFG_F_GSO bulk arrives as 64 KB super-packets, far fewer than this.
// The result doubles that for bursts and jitter, and is at least kDefaultMaxlen, at most
// kMaxMaxlen. A rate of 0 (unshaped) counts as kStagePpsCeiling packets/s. Pass the delay plus
// a few jitter deviations when the link has jitter. Memory is spent only on packets actually
// held, so a generous maxlen costs nothing while the link is idle.
inline constexpr uint32_t kMinPacketBytes = 64;
inline constexpr double kStagePpsCeiling = 250'000;
uint32_t queue_maxlen_for(Rate rate, Duration delay, int mtu);

}  // namespace tb::stage
