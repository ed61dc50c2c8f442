#include "scenario/presets.h"

#include <array>
#include <utility>

namespace tb::scenario {
namespace {

// Real-world figures, per direction and one way, with the publication they come from. Rates and
// delays are written as users would write them and parsed once, so a preset reads like a
// [profiles] table.
struct PresetRow {
  const char* name;
  const char* rate;
  const char* delay;
  const char* jitter;
  int mtu;
  const char* source;
  // Congestion model and real-world thresholds (model.h CongestionSpec; docs/scenario.md
  // "Congestion" cites each). Only lossless and ecn rows give thresholds.
  const char* congestion = "droptail";
  const char* xoff = nullptr;
  const char* xon = nullptr;
  const char* headroom = nullptr;
  const char* buffer = nullptr;
  const char* kmin = nullptr;  // ecn
  const char* kmax = nullptr;
  double pmax_pct = 0;
};

constexpr std::array kPresets = {
    PresetRow{"nvlink", "900GB/s", "100ns", "0", 9000,
              "NVLink 4 / NVSwitch, 900 GB/s per GPU, <100 ns — Alibaba Cloud AI network white "
              "paper; emulated as Ethernet jumbo frames"},
    PresetRow{"pcie", "64GB/s", "500ns", "0", 9000,
              "PCIe Gen5 x16, 64 GB/s per direction, ~500 ns through the root complex — PCI-SIG "
              "PCIe 5.0 specification; emulated as Ethernet jumbo frames"},
    PresetRow{"hpn", "400gbit", "2us", "0", 4200,
              "Alibaba HPN (SIGCOMM'24, \"Alibaba HPN: A Data Center Network for Large Language "
              "Model Training\"): 400G NIC ports, ~2 us per hop; MTU 4200 carries RoCE MTU 4096",
              // HPN's rails are lossless RoCE (PFC). No per-port figure of a 51.2 Tbit/s chip's
              // shared buffer is published, so these are ASSUMPTIONS (docs/scenario.md): XOFF
              // 200K / XON 160K and a 1 MiB share per port; headroom after 802.1Qbb = 2 MTU +
              // rate x (2 x cable delay + response time) = 2 x 4200 B + 50 GB/s x (2 x 0.5 us
              // (100 m) + 1 us) = 108.4 KB, written 106K.
              "lossless", "200K", "160K", "106K", "1M"},
    PresetRow{"vpc", "25gbit", "250us", "0", 1500,
              "Alibaba Cloud VPC: 25–100 Gbit/s per instance, 100–500 us within a zone; the low "
              "end",
              // The VPC marks ECN (the white paper: DCQCN / DCTCP-like). DCQCN's marking (Zhu et
              // al., SIGCOMM 2015, "Congestion Control for Large-Scale RDMA Deployments"): Kmin
              // 5 KB, Kmax 200 KB, Pmax 1%.
              "ecn", nullptr, nullptr, nullptr, nullptr, "5K", "200K", 1.0},
    PresetRow{"cen", "100gbit", "25ms", "0", 1500,
              "Alibaba Cloud CEN (Cloud Enterprise Network) cross-region, e.g. Hangzhou–Beijing: "
              "20–30 ms one way"},
    PresetRow{"express-connect", "400gbit", "25ms", "0", 1500,
              "Alibaba Cloud Express Connect dedicated 400G circuit, Hangzhou–Beijing ~25 ms one "
              "way"},
    PresetRow{"vpn", "1gbit", "30ms", "1ms", 1400,
              "IPsec VPN over the Internet as a backup path: ~1 Gbit/s, ~30 ms, jitter; MTU 1400 "
              "leaves room for ESP overhead"},
};

}  // namespace

std::optional<LinkProfile> preset(const std::string& name) {
  for (const auto& row : kPresets) {
    if (name != row.name) continue;
    LinkProfile p;
    p.name = row.name;
    p.preset = row.name;
    // The table above is ours; a figure that does not parse is a bug, not bad input.
    auto rate = parse_rate(row.rate);
    auto delay = parse_duration(row.delay);
    auto jitter = parse_duration(row.jitter);
    TB_CHECK(rate && delay && jitter);
    p.rate = *rate;
    p.delay = *delay;
    p.jitter = *jitter;
    p.mtu = row.mtu;
    p.source = row.source;
    p.congestion.model = row.congestion;
    for (auto [text, out] :
         {std::pair{row.xoff, &p.congestion.xoff}, std::pair{row.xon, &p.congestion.xon},
          std::pair{row.headroom, &p.congestion.headroom},
          std::pair{row.buffer, &p.congestion.buffer}, std::pair{row.kmin, &p.congestion.kmin},
          std::pair{row.kmax, &p.congestion.kmax}}) {
      if (!text) continue;
      auto bytes = parse_size(text);
      TB_CHECK(bytes.has_value());
      *out = *bytes;
    }
    p.congestion.pmax_pct = row.pmax_pct;
    return p;
  }
  return std::nullopt;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& row : kPresets) names.emplace_back(row.name);
  return names;
}

}  // namespace tb::scenario
