#include "shaping/qdisc_plan.h"

#include <fmt/format.h>

#include "core/overload.h"

namespace tb::shaping {
namespace {

std::string rate_text(uint64_t bytes_per_s) {
  return format_rate(Rate{static_cast<double>(bytes_per_s) * 8});
}

std::string options_text(const netlink::TcOptions& o) {
  return std::visit(
      Overload{
          [](const netlink::TbfOptions& t) {
            return "rate " + rate_text(t.rate) + " burst " + std::to_string(t.burst) + "b limit " +
                   std::to_string(t.limit) + "b";
          },
          [](const netlink::NetemOptions& n) {
            std::string s = "limit " + std::to_string(n.limit);
            if (n.delay_ns || n.jitter_ns) s += " delay " + format_duration(Duration{n.delay_ns});
            if (n.jitter_ns) {
              s += " " + format_duration(Duration{n.jitter_ns});
              s += n.jitter_table.empty() ? " (uniform)" : " distribution normal";
            }
            if (n.loss_pct > 0) s += " loss " + fmt::format("{:g}", n.loss_pct) + "%";
            if (n.rate) s += " rate " + rate_text(n.rate);
            return s;
          },
          [](const netlink::HtbOptions& h) { return "default " + std::to_string(h.default_class); },
          [](const netlink::HtbClassOptions& c) {
            return "rate " + rate_text(c.rate) + " ceil " + rate_text(c.ceil) + " burst " +
                   std::to_string(c.burst) + "b cburst " + std::to_string(c.cburst) + "b quantum " +
                   std::to_string(c.quantum) + (c.prio ? " prio " + std::to_string(c.prio) : "");
          },
          [](const netlink::BfifoOptions& b) { return "limit " + std::to_string(b.limit) + "b"; },
          [](const netlink::RedOptions& r) {
            return "limit " + std::to_string(r.limit) + "b min " + std::to_string(r.qth_min) +
                   "b max " + std::to_string(r.qth_max) + "b probability " +
                   fmt::format("{:g}", static_cast<double>(r.max_p) / 4294967296.0) + " ecn" +
                   (r.nodrop ? " nodrop" : "");
          },
      },
      o);
}

}  // namespace

std::string to_text(const TcNode& n) {
  std::string s = n.is_class() ? "class " : "qdisc ";
  s += std::string(n.kind()) + " " + netlink::format_handle(n.handle);
  s += n.parent == kRootParent ? " root " : " parent " + netlink::format_handle(n.parent) + " ";
  s += options_text(n.options);
  return n.label.empty() ? s : s + " (" + n.label + ")";
}

std::string to_text(const QdiscPlan::Filter& f) {
  return "filter u32 parent " + netlink::format_handle(f.f.parent) + " protocol ip prio " +
         std::to_string(f.f.prio) + " handle " + netlink::format_u32_handle(f.f.handle) +
         fmt::format(" match ip dsfield {:#04x} 0xfc", f.f.dscp << 2) + " classid " +
         netlink::format_handle(f.f.classid) + (f.label.empty() ? "" : " (" + f.label + ")");
}

std::string to_text(const QdiscPlan& p) {
  std::string s;
  for (const auto& n : p.nodes) s += to_text(n) + "\n";
  for (const auto& f : p.filters) s += to_text(f) + "\n";
  if (p.nodes.empty()) s += "qdisc default root\n";
  if (!p.residual.empty()) {
    s += "residual";
    if (p.residual.delay.ns) s += " delay " + format_duration(p.residual.delay);
    if (p.residual.jitter.ns) s += " jitter " + format_duration(p.residual.jitter);
    if (p.residual.loss_pct > 0) s += " loss " + fmt::format("{:g}", p.residual.loss_pct) + "%";
    s += "\n";
  }
  return s;
}

}  // namespace tb::shaping
