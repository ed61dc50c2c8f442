#include "shaping/backend.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

namespace tb::shaping {
namespace {

constexpr std::array<std::string_view, 2> kNetemNeeds{"netem", "tbf"};
constexpr std::array<std::string_view, 1> kTbfNeeds{"tbf"};
constexpr std::array<std::string_view, 1> kHtbNeeds{"htb"};

// Order = preference.
const std::array<Backend, 3> kBackends{{
    {"netem", "rate (tbf), delay, jitter and loss (netem)", kNetemNeeds, build_netem},
    {"tbf", "rate (tbf); delay, jitter and loss left to the userspace stage", kTbfNeeds, build_tbf},
    {"htb", "rate (htb class); delay, jitter and loss left to the userspace stage", kHtbNeeds,
     build_htb},
}};

// IPv4's minimum MTU (RFC 791; net/ipv4/route.c IPV4_MIN_MTU 68) and the largest an
// interface takes (IP_MAX_MTU 0xFFFF).
constexpr int kMinMtu = 68;
constexpr int kMaxMtu = 65535;

std::string number(double v) {
  return fmt::format("{:g}", v);
}

}  // namespace

std::span<const Backend> backend_registry() {
  return kBackends;
}

const Backend* find_backend(std::string_view kind) {
  for (const auto& b : kBackends)
    if (b.kind == kind) return &b;
  return nullptr;
}

std::string backend_kinds() {
  std::string s;
  for (const auto& b : kBackends) s += (s.empty() ? "" : ", ") + std::string(b.kind);
  return s;
}

const Backend* pick_backend(std::span<const std::string> available) {
  for (const auto& b : kBackends) {
    const bool all = std::ranges::all_of(b.needs, [&](std::string_view need) {
      return std::ranges::find(available, need) != available.end();
    });
    if (all) return &b;
  }
  return nullptr;
}

Status validate(const LinkShape& s) {
  if (!std::isfinite(s.rate.bps) || s.rate.bps < 0)
    return bad_input("rate " + number(s.rate.bps) + " bit/s is not a rate");
  if (s.rate.bps > 0 && s.rate.bps < 8)
    return bad_input("rate " + format_rate(s.rate) +
                     " is below 8 bit/s, the smallest the kernel "
                     "takes (rates are whole bytes per second)");
  if (s.delay.ns < 0) return bad_input("delay " + format_duration(s.delay) + " is negative");
  if (s.jitter.ns < 0) return bad_input("jitter " + format_duration(s.jitter) + " is negative");
  if (!std::isfinite(s.loss_pct) || s.loss_pct < 0 || s.loss_pct > 100)
    return bad_input("loss " + number(s.loss_pct) + "% is outside 0..100%");
  if (s.mtu < kMinMtu || s.mtu > kMaxMtu)
    return bad_input("mtu " + std::to_string(s.mtu) + " is outside " + std::to_string(kMinMtu) +
                     ".." + std::to_string(kMaxMtu));
  return {};
}

Result<QdiscPlan> plan_qdiscs(const LinkShape& s, std::string_view backend) {
  const Backend* b = find_backend(backend);
  if (!b)
    return bad_input("unknown shaping backend \"" + std::string(backend) +
                     "\" (known: " + backend_kinds() + ")");
  TB_TRY(validate(s));
  return b->build(s);
}

}  // namespace tb::shaping
