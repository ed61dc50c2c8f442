// What tb-probe puts on the wire, byte for byte, so a unit test can pin it.
//
//   probe datagram (UDP, 32 bytes, echoed back unchanged by `serve`):
//     magic u32 "tbpr" | version u32 | session u64 | seq u64 | send time ns u64
//   goodput hello (TCP, first 16 bytes the sender writes):
//     magic u32 "tbgp" | version u32 | warm-up ms u32 | reserved u32
//   goodput report (TCP, 40 bytes the receiver writes back after the sender's FIN):
//     magic u32 "tbgr" | version u32 | bytes u64 | ns u64 | bytes after warm-up u64 | ns u64
//
// All integers big-endian. Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

namespace tb::probe {

inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kProbeMagic = 0x74627072;   // "tbpr"
inline constexpr uint32_t kHelloMagic = 0x74626770;   // "tbgp"
inline constexpr uint32_t kReportMagic = 0x74626772;  // "tbgr"
inline constexpr size_t kProbeBytes = 32;
inline constexpr size_t kHelloBytes = 16;
inline constexpr size_t kReportBytes = 40;

struct ProbePacket {
  uint64_t session = 0;  // random per `rtt` run: replies to another run are ignored
  uint64_t seq = 0;
  int64_t sent_ns = 0;  // CLOCK_MONOTONIC of the sender
  friend bool operator==(const ProbePacket&, const ProbePacket&) = default;
};

struct GoodputHello {
  uint32_t warmup_ms = 0;  // the receiver starts its measured window this long after byte one
  friend bool operator==(const GoodputHello&, const GoodputHello&) = default;
};

// What the receiver counted: everything from the first to the last payload byte, and the
// part after the warm-up (0 bytes when the transfer ended inside the warm-up).
struct GoodputReport {
  uint64_t bytes = 0;
  uint64_t ns = 0;
  uint64_t measured_bytes = 0;
  uint64_t measured_ns = 0;
  friend bool operator==(const GoodputReport&, const GoodputReport&) = default;
};

std::array<uint8_t, kProbeBytes> encode(const ProbePacket& p);
std::array<uint8_t, kHelloBytes> encode(const GoodputHello& h);
std::array<uint8_t, kReportBytes> encode(const GoodputReport& r);

// nullopt when the bytes are too short, or the magic or version is not ours.
std::optional<ProbePacket> decode_probe(std::span<const uint8_t> b);
std::optional<GoodputHello> decode_hello(std::span<const uint8_t> b);
std::optional<GoodputReport> decode_report(std::span<const uint8_t> b);

}  // namespace tb::probe
