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

Status validate_qos(const Qos& q) {
  if (q.classes.empty()) return {};
  if (q.classes.size() > kMaxQosClasses)
    return bad_input("qos: " + std::to_string(q.classes.size()) + " classes; at most " +
                     std::to_string(kMaxQosClasses));
  if (q.default_class >= q.classes.size())
    return bad_input("qos: default class #" + std::to_string(q.default_class) + " of " +
                     std::to_string(q.classes.size()));
  double total = 0;
  std::array<std::string, 64> owner;
  for (const auto& c : q.classes) {
    const std::string at = "qos class \"" + c.name + "\": ";
    if (!std::isfinite(c.share) || c.share <= 0 || c.share > 1)
      return bad_input(at + "share " + fmt::format("{:g}", c.share * 100) +
                       "% is outside (0, 100%]");
    if (!std::isfinite(c.ceiling) || c.ceiling < c.share || c.ceiling > 1)
      return bad_input(at + "ceiling " + fmt::format("{:g}", c.ceiling * 100) +
                       "% is outside [share " + fmt::format("{:g}", c.share * 100) + "%, 100%]");
    if (c.priority < 0 || c.priority > 7)
      return bad_input(at + "priority " + std::to_string(c.priority) + " is outside 0..7");
    if (c.dscp.empty()) return bad_input(at + "no DSCP value is classified into it");
    for (int d : c.dscp) {
      if (d < 0 || d > 63) return bad_input(at + "DSCP " + std::to_string(d) + " is outside 0..63");
      if (!owner[d].empty())
        return bad_input(at + "DSCP " + std::to_string(d) + " is already in class \"" + owner[d] +
                         "\"");
      owner[d] = c.name;
    }
    total += c.share;
  }
  if (total > 1 + 1e-9)
    return bad_input("qos: the classes' shares add up to " + fmt::format("{:g}", total * 100) +
                     "%, more than the link's rate");
  return {};
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
    return bad_input("rate " + fmt::format("{:g}", s.rate.bps) + " bit/s is not a rate");
  if (s.rate.bps > 0 && s.rate.bps < 8)
    return bad_input("rate " + format_rate(s.rate) +
                     " is below 8 bit/s, the smallest the kernel "
                     "takes (rates are whole bytes per second)");
  if (s.delay.ns < 0) return bad_input("delay " + format_duration(s.delay) + " is negative");
  if (s.jitter.ns < 0) return bad_input("jitter " + format_duration(s.jitter) + " is negative");
  if (!std::isfinite(s.loss_pct) || s.loss_pct < 0 || s.loss_pct > 100)
    return bad_input("loss " + fmt::format("{:g}", s.loss_pct) + "% is outside 0..100%");
  TB_TRY(validate_qos(s.qos));
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
