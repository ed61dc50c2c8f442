#include "probe/packet.h"

namespace tb::probe {
namespace {

void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}
bool header_ok(std::span<const uint8_t> b, size_t size, uint32_t magic) {
  return b.size() >= size && get32(b.data()) == magic && get32(b.data() + 4) == kVersion;
}

}  // namespace

std::array<uint8_t, kProbeBytes> encode(const ProbePacket& p) {
  std::array<uint8_t, kProbeBytes> b{};
  put32(b.data(), kProbeMagic);
  put32(b.data() + 4, kVersion);
  put64(b.data() + 8, p.session);
  put64(b.data() + 16, p.seq);
  put64(b.data() + 24, static_cast<uint64_t>(p.sent_ns));
  return b;
}

std::array<uint8_t, kHelloBytes> encode(const GoodputHello& h) {
  std::array<uint8_t, kHelloBytes> b{};
  put32(b.data(), kHelloMagic);
  put32(b.data() + 4, kVersion);
  put32(b.data() + 8, h.warmup_ms);
  return b;
}

std::array<uint8_t, kReportBytes> encode(const GoodputReport& r) {
  std::array<uint8_t, kReportBytes> b{};
  put32(b.data(), kReportMagic);
  put32(b.data() + 4, kVersion);
  put64(b.data() + 8, r.bytes);
  put64(b.data() + 16, r.ns);
  put64(b.data() + 24, r.measured_bytes);
  put64(b.data() + 32, r.measured_ns);
  return b;
}

std::optional<ProbePacket> decode_probe(std::span<const uint8_t> b) {
  if (!header_ok(b, kProbeBytes, kProbeMagic)) return std::nullopt;
  return ProbePacket{get64(b.data() + 8), get64(b.data() + 16),
                     static_cast<int64_t>(get64(b.data() + 24))};
}

std::optional<GoodputHello> decode_hello(std::span<const uint8_t> b) {
  if (!header_ok(b, kHelloBytes, kHelloMagic)) return std::nullopt;
  return GoodputHello{get32(b.data() + 8)};
}

std::optional<GoodputReport> decode_report(std::span<const uint8_t> b) {
  if (!header_ok(b, kReportBytes, kReportMagic)) return std::nullopt;
  return GoodputReport{get64(b.data() + 8), get64(b.data() + 16), get64(b.data() + 24),
                       get64(b.data() + 32)};
}

}  // namespace tb::probe
