#include "congestion/counters.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace tb::congestion {
namespace {

using nlohmann::json;

uint64_t counter_less(uint64_t a, uint64_t b) {
  return a >= b ? a - b : a;  // a counter that went back counts from zero
}

std::string seconds_text(double s) {
  return s >= 10 ? fmt::format("{:.1f} s", s) : fmt::format("{:.2f} s", s);
}

}  // namespace

const char* source_name(Source s) {
  switch (s) {
    case Source::kCounted:
      return "counted";
    case Source::kStale:
      return "stale";
    case Source::kNoAgent:
      return "no agent";
    case Source::kNotRunning:
      return "not running";
    case Source::kUnreadable:
      return "unreadable";
  }
  return "?";
}

Counters counters_from_stats(const AgentStats& s) {
  Counters c;
  c.source = Source::kCounted;
  c.pid = s.pid;
  c.uptime_s = s.uptime_s;
  c.stopped = s.stopped;
  c.late_polls = s.late_polls;
  c.late_ms_max = s.late_ms_max;
  c.wake = s.wake;
  for (const auto& [name, p] : s.ports) {
    PortCounters& pc = c.ports[name];
    pc.model = p.model;
    pc.xoff_events = p.xoff_events;
    pc.backlog = p.backlog;
    pc.backlog_max = p.backlog_max;
    pc.drops = p.drops;
    pc.storm = p.storm;
    pc.watchdog_trips = p.watchdog.trips;
    pc.mitigating = p.watchdog.mitigating;
    pc.watchdog_dropped = p.watchdog.dropped;
    if (p.model == "ecn") {
      pc.ce_marks = p.ecn.ce_marks;
      pc.ect = p.ecn.ect;
      pc.not_ect = p.ecn.not_ect;
      pc.marking_p = p.ecn.marking_p;
      pc.marked_by = p.ecn.marked_by;
    }
  }
  for (const auto& [name, u] : s.upstreams) {
    c.upstreams[name] = {u.pauses, u.paused_ns, u.paused_now, u.pause_expired, u.by};
    for (const auto& [port, n] : u.by) c.ports[port].pauses_sent += n;
  }
  return c;
}

Counters read_counters(const std::string& lab_dir) {
  const std::string stages = lab_dir + "/stages/";
  Counters c;
  c.path = stages + kStatsFile;
  std::error_code ec;
  const bool config = std::filesystem::exists(stages + kConfigFile, ec);
  const bool stats = std::filesystem::exists(c.path, ec);
  if (!config && !stats) {
    c.source = Source::kNoAgent;
    c.why = "no congestion agent in this lab (no lossless or ecn link)";
    return c;
  }
  if (!stats) {
    c.source = Source::kNotRunning;
    c.why = "the congestion agent has written no stats file (" + c.path + "): not running";
    return c;
  }
  const auto mtime = std::filesystem::last_write_time(c.path, ec);
  auto s = read_stats(c.path);
  if (!s) {
    c.source = Source::kUnreadable;
    c.why = s.error().message;
    return c;
  }
  auto path = c.path;
  c = counters_from_stats(*s);
  c.path = path;
  if (!ec)
    c.age_s = std::chrono::duration<double>(std::filesystem::file_time_type::clock::now() - mtime)
                  .count();
  if (!c.stopped && c.age_s > kStaleAfterS) {
    c.source = Source::kStale;
    c.why = fmt::format(
        "the congestion agent (pid {}) last wrote its stats {:.1f} s ago (every 0.2 s while it "
        "runs): not running; counts until then",
        c.pid, c.age_s);
  } else if (c.stopped) {
    c.why = "the congestion agent stopped (it resumed every queue); counts until then";
  }
  return c;
}

Counters delta(const Counters& before, const Counters& after) {
  // No file before, counts after: the agent started inside the window (a verb right after
  // `up`), so all it counted is the window's.
  if (before.source == Source::kNotRunning && after.has_counts()) {
    Counters c = after;
    c.why = fmt::format(
        "the congestion agent wrote its first stats during the window: counts since its start, "
        "{:.1f} s",
        after.uptime_s);
    return c;
  }
  if (!before.has_counts() || !after.has_counts()) {
    Counters c;
    c.source = after.has_counts() ? before.source : after.source;
    c.path = after.path;
    c.why = after.has_counts() ? "before: " + before.why : after.why;
    return c;
  }
  Counters c = after;
  if (after.pid != before.pid || after.uptime_s < before.uptime_s) {
    c.why = fmt::format(
        "the congestion agent restarted during the window (pid {} -> {}): counts since its "
        "restart, {:.1f} s",
        before.pid, after.pid, after.uptime_s);
    return c;
  }
  c.uptime_s = after.uptime_s - before.uptime_s;
  c.late_polls = counter_less(after.late_polls, before.late_polls);
  for (auto& [name, p] : c.ports)
    if (auto it = before.ports.find(name); it != before.ports.end()) {
      p.pauses_sent = counter_less(p.pauses_sent, it->second.pauses_sent);
      p.xoff_events = counter_less(p.xoff_events, it->second.xoff_events);
      p.drops = counter_less(p.drops, it->second.drops);
      p.watchdog_trips = counter_less(p.watchdog_trips, it->second.watchdog_trips);
      p.watchdog_dropped = counter_less(p.watchdog_dropped, it->second.watchdog_dropped);
      if (p.ce_marks && it->second.ce_marks)
        p.ce_marks = counter_less(*p.ce_marks, *it->second.ce_marks);
      p.ect = counter_less(p.ect, it->second.ect);
      p.not_ect = counter_less(p.not_ect, it->second.not_ect);
    }
  for (auto& [name, u] : c.upstreams)
    if (auto it = before.upstreams.find(name); it != before.upstreams.end()) {
      const auto& b = it->second;
      u.pauses_received = counter_less(u.pauses_received, b.pauses_received);
      u.paused_ns = u.paused_ns >= b.paused_ns ? u.paused_ns - b.paused_ns : u.paused_ns;
      u.pause_expired = counter_less(u.pause_expired, b.pause_expired);
      for (auto& [port, n] : u.by)
        if (auto k = b.by.find(port); k != b.by.end()) n = counter_less(n, k->second);
    }
  return c;
}

Totals totals(const Counters& c) {
  Totals t;
  for (const auto& [name, p] : c.ports) {
    ++t.ports;
    t.xoff_events += p.xoff_events;
    t.drops += p.drops;
    t.lossless_drops += p.violations();
    t.watchdog_trips += p.watchdog_trips;
    t.watchdog_dropped += p.watchdog_dropped;
    t.storms += p.storm;
    if (p.ce_marks) {
      ++t.ecn_ports;
      if (p.marked_by == "red") ++t.red_ports;
      t.ce_marks += *p.ce_marks;
      t.ect += p.ect;
    }
  }
  for (const auto& [name, u] : c.upstreams) {
    ++t.upstreams;
    t.pauses += u.pauses_received;
    t.paused_upstreams += u.pauses_received > 0;
    t.paused_ns += u.paused_ns;
    if (u.paused_ns > t.busiest_ns) {
      t.busiest = name;
      t.busiest_ns = u.paused_ns;
    }
  }
  return t;
}

json to_json(const Counters& c, bool window) {
  json j = {{"source", kCountersSource},
            {"backend", kCountersBackend},
            {"state", source_name(c.source)},
            {"stats_file", c.path}};
  if (!c.why.empty()) j["why"] = c.why;
  if (!c.has_counts()) return j;
  j[window ? "window_s" : "uptime_s"] = c.uptime_s;
  j["pid"] = c.pid;
  j["stopped"] = c.stopped;
  j["late_polls"] = c.late_polls;
  if (!c.wake.empty()) j["wake"] = c.wake;
  j[window ? "late_ms_max_since_agent_start" : "late_ms_max"] = c.late_ms_max;
  json ports = json::object(), ups = json::object();
  for (const auto& [name, p] : c.ports) {
    ports[name] = {{"model", p.model},
                   {"pauses_sent", p.pauses_sent},
                   {"xoff_events", p.xoff_events},
                   {"drops", p.drops},
                   {"backlog_bytes", p.backlog},
                   {"backlog_max_bytes_since_agent_start", p.backlog_max}};
    if (p.lossless()) ports[name]["lossless_violations"] = p.violations();
    if (p.ce_marks) {
      ports[name]["ce_marks"] = *p.ce_marks;
      ports[name]["ect_packets"] = p.ect;
      ports[name]["not_ect_packets"] = p.not_ect;
      ports[name]["marking_p_now"] = p.marking_p;
      if (!p.marked_by.empty()) ports[name]["marked_by"] = p.marked_by;
    }
    ports[name]["storm"] = p.storm;
    ports[name]["watchdog"] = {
        {"trips", p.watchdog_trips}, {"mitigating", p.mitigating}, {"dropped", p.watchdog_dropped}};
  }
  for (const auto& [name, u] : c.upstreams)
    ups[name] = {{"pauses_received", u.pauses_received},
                 {"paused_ns", u.paused_ns},
                 {"paused_fraction",
                  c.uptime_s > 0 ? static_cast<double>(u.paused_ns) / (c.uptime_s * 1e9) : 0.0},
                 {"paused_now", u.paused_now},
                 {"pause_expired", u.pause_expired},
                 {"by", u.by}};
  const Totals t = totals(c);
  j["ports"] = ports;
  j["upstreams"] = ups;
  j["totals"] = {{"pauses", t.pauses},
                 {"paused_ns", t.paused_ns},
                 {"paused_upstreams", t.paused_upstreams},
                 {"upstreams", t.upstreams},
                 {"busiest_upstream", t.busiest},
                 {"busiest_paused_ns", t.busiest_ns},
                 {"xoff_events", t.xoff_events},
                 {"drops", t.drops},
                 {"lossless_drops", t.lossless_drops},
                 {"watchdog_trips", t.watchdog_trips},
                 {"watchdog_dropped", t.watchdog_dropped},
                 {"storms_held", t.storms}};
  if (t.ecn_ports > 0) {
    j["totals"]["ce_marks"] = t.ce_marks;
    j["totals"]["ect_packets"] = t.ect;
    j["totals"]["ecn_ports"] = t.ecn_ports;
  }
  return j;
}

std::string summary_line(const Counters& c) {
  if (!c.has_counts()) return "no counts: " + c.why;
  const Totals t = totals(c);
  std::string s = fmt::format("{} pauses", t.pauses);
  if (t.pauses > 0)
    s += fmt::format(" (paused {} summed over the {} of {} upstream(s) paused, busiest {} {})",
                     seconds_text(static_cast<double>(t.paused_ns) / 1e9), t.paused_upstreams,
                     t.upstreams, t.busiest, seconds_text(static_cast<double>(t.busiest_ns) / 1e9));
  s += fmt::format(", {} XOFF events, {} lossless drops", t.xoff_events, t.lossless_drops);
  if (t.lossless_drops > 0) s += " (LOSSLESS VIOLATED)";
  if (t.watchdog_trips > 0 || t.watchdog_dropped > 0)
    s += fmt::format(", {} PFC watchdog trip(s) ({} packet(s) dropped by its mitigation)",
                     t.watchdog_trips, t.watchdog_dropped);
  if (t.storms > 0) s += fmt::format(", a pfc-storm holds {} port(s) now", t.storms);
  if (t.ecn_ports > 0 && t.red_ports == t.ecn_ports)
    s += fmt::format(", {} CE marks at {} ecn port(s) (the kernel's RED)", t.ce_marks, t.ecn_ports);
  else if (t.ecn_ports > 0)
    s += fmt::format(", {} CE marks of {} ECT packets at {} ecn port(s)", t.ce_marks, t.ect,
                     t.ecn_ports);
  s += fmt::format(" over {} ({}; {} polled ports)", seconds_text(c.uptime_s), kCountersSource,
                   t.ports);
  if (!c.why.empty()) s += "; " + c.why;
  return s;
}

}  // namespace tb::congestion
