#include "report/congestion.h"

#include <fmt/format.h>

#include "report/format.h"

namespace tb::report {
namespace {

using nlohmann::json;

std::string end_name(const plan::LinkEnd& e) {
  return e.node + ":" + e.ifname;
}

// "180KB", "2.19MB", "900B" (decimal units, as the plan's thresholds).
std::string queue_bytes_text(uint64_t b) {
  const auto d = static_cast<double>(b);
  if (b >= 1'000'000) return fmt::format("{:.2f}MB", d / 1e6);
  if (b >= 1'000) return fmt::format("{:.0f}KB", d / 1e3);
  return fmt::format("{}B", b);
}

std::string paused_text(int64_t ns, double since_s, bool now) {
  std::string s = fmt::format("{:.2f} s", static_cast<double>(ns) / 1e9);
  if (since_s > 0) s += fmt::format(" ({:.1f}%)", 100 * static_cast<double>(ns) / (since_s * 1e9));
  return now ? s + ", now" : s;
}

json end_json(const congestion::Counters& c, const std::string& end) {
  const auto p = c.ports.find(end);
  const auto u = c.upstreams.find(end);
  if (p == c.ports.end() && u == c.upstreams.end()) return nullptr;
  json j = {{"end", end}};
  if (p != c.ports.end()) {
    j["pauses_sent"] = p->second.pauses_sent;
    j["xoff_events"] = p->second.xoff_events;
    j["drops"] = p->second.drops;
    j["backlog_bytes"] = p->second.backlog;
    j["backlog_max_bytes"] = p->second.backlog_max;
    if (p->second.lossless()) j["lossless_violations"] = p->second.violations();
    if (p->second.ce_marks) {
      j["ce_marks"] = *p->second.ce_marks;
      if (!p->second.marked_by.empty()) j["marked_by"] = p->second.marked_by;
      j["ect_packets"] = p->second.ect;
      j["not_ect_packets"] = p->second.not_ect;
      j["marking_p_now"] = p->second.marking_p;
    }
    j["storm"] = p->second.storm;
    j["watchdog"] = {{"trips", p->second.watchdog_trips},
                     {"mitigating", p->second.mitigating},
                     {"dropped", p->second.watchdog_dropped}};
  }
  if (u != c.upstreams.end()) {
    j["pauses_received"] = u->second.pauses_received;
    j["paused_ns"] = u->second.paused_ns;
    j["paused_fraction"] =
        c.uptime_s > 0 ? static_cast<double>(u->second.paused_ns) / (c.uptime_s * 1e9) : 0.0;
    j["paused_now"] = u->second.paused_now;
    j["by"] = u->second.by;
  }
  return j;
}

}  // namespace

std::string congestion_status_text(const congestion::Counters& c, const plan::Topology& t) {
  if (c.source == congestion::Source::kNoAgent) return "";
  if (!c.has_counts()) return "\nCONGESTION COUNTERS: none: " + c.why + "\n";
  std::string s = fmt::format(
      "\nCONGESTION COUNTERS (from the congestion agent's stats file {}, counted since it started "
      "{:.1f} s ago, pid {}; a pause = the agent holding that end's TBF at 1 B/s, sent by the "
      "switch port whose queue passed XOFF)\n",
      c.path, c.uptime_s, c.pid);
  if (c.source == congestion::Source::kStale || c.stopped) s += "  " + c.why + "\n";
  bool ecn = false;
  for (const auto& [name, p] : c.ports) ecn = ecn || p.ce_marks.has_value();
  s += cell("LINK END", 20) + cell("PAUSES SENT", 12) + cell("XOFF", 8) + cell("QUEUE MAX", 10) +
       cell("DROPS", 12) + (ecn ? cell("CE MARKS", 18) : "") + cell("PAUSES RCVD", 12) + "PAUSED\n";
  int idle = 0;
  std::string watchdog;  // a line per port a storm holds or the watchdog tripped on
  for (const auto& l : t.links)
    for (const auto* e : {&l.a, &l.b}) {
      const std::string end = end_name(*e);
      const auto p = c.ports.find(end);
      const auto u = c.upstreams.find(end);
      if (p == c.ports.end() && u == c.upstreams.end()) continue;
      const bool active =
          (p != c.ports.end() &&
           (p->second.pauses_sent || p->second.xoff_events || p->second.drops || p->second.storm ||
            p->second.watchdog_trips || p->second.ect || p->second.ce_marks.value_or(0))) ||
          (u != c.upstreams.end() && (u->second.pauses_received || u->second.paused_now));
      if (!active) {
        ++idle;
        continue;
      }
      std::string drops = "-";
      if (p != c.ports.end()) {
        drops = std::to_string(p->second.drops);
        if (p->second.violations() > 0) drops += " LOSSLESS!";
        if (p->second.storm || p->second.watchdog_trips)
          watchdog += fmt::format(
              "  {}: {}PFC watchdog {} trip(s){}, {} packet(s) dropped by its mitigation (in "
              "DROPS, not lossless violations)\n",
              end, p->second.storm ? "a pfc-storm holds it paused; " : "", p->second.watchdog_trips,
              p->second.mitigating ? ", mitigating now" : "", p->second.watchdog_dropped);
      }
      s += cell(end, 20) +
           cell(p != c.ports.end() ? std::to_string(p->second.pauses_sent) : "-", 12) +
           cell(p != c.ports.end() ? std::to_string(p->second.xoff_events) : "-", 8) +
           cell(p != c.ports.end() ? queue_bytes_text(p->second.backlog_max) : "-", 10) +
           cell(drops, 12) +
           (ecn ? cell(p != c.ports.end() && p->second.ce_marks
                           ? (p->second.marked_by == "red"
                                  ? fmt::format("{} (RED)", *p->second.ce_marks)
                                  : fmt::format("{} of {}", *p->second.ce_marks, p->second.ect))
                           : "-",
                       18)
                : "") +
           cell(u != c.upstreams.end() ? std::to_string(u->second.pauses_received) : "-", 12) +
           (u != c.upstreams.end()
                ? paused_text(u->second.paused_ns, c.uptime_s, u->second.paused_now)
                : "-") +
           "\n";
    }
  s += watchdog;
  if (ecn)
    s += "  CE MARKS: ECT packets the delay stage just after an ecn port marked CE, of the ECT "
         "packets it took, with the probability the agent published from that port's backlog\n";
  if (idle > 0)
    s += fmt::format("  {} other link end(s) the agent counts: no pause, XOFF or drop\n", idle);
  if (!c.wake.empty())
    s += "  the agent's idle wake: " + c.wake +
         (c.wake.starts_with("none") ? " (it polls every idle period instead)\n"
                                     : " (it dumps the queues only when a port was offered "
                                       "enough to matter)\n");
  if (c.late_polls > 0)
    s += fmt::format(
        "  the agent polled late {} time(s) (max {:.2f} ms): a lossless drop then is "
        "the host's, not the model's\n",
        c.late_polls, c.late_ms_max);
  return s;
}

json link_congestion_json(const congestion::Counters& c, const plan::Link& l) {
  json j = {{"model", l.emulated.congestion.model}};
  if (c.source == congestion::Source::kNoAgent) return j;
  j["state"] = congestion::source_name(c.source);
  j["source"] = congestion::kCountersSource;
  if (!c.why.empty()) j["why"] = c.why;
  if (!c.has_counts()) return j;
  j["since_s"] = c.uptime_s;
  j["a"] = end_json(c, end_name(l.a));
  j["b"] = end_json(c, end_name(l.b));
  return j;
}

std::string congestion_window_line(const congestion::Counters& window) {
  if (window.source == congestion::Source::kNoAgent) return "";
  const bool ecn = congestion::totals(window).ecn_ports > 0;
  return std::string(ecn ? "PFC/ECN (lossless and ecn links): " : "PFC (lossless links): ") +
         congestion::summary_line(window);
}

}  // namespace tb::report
