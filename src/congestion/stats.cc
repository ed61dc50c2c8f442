#include "congestion/stats.h"

#include <fstream>
#include <nlohmann/json.hpp>

namespace tb::congestion {

using nlohmann::json;

json to_json(const AgentStats& s) {
  json ports = json::object(), ups = json::object();
  for (const auto& [name, p] : s.ports)
    ports[name] = {{"model", p.model},
                   {"backlog", p.backlog},
                   {"backlog_max", p.backlog_max},
                   {"drops", p.drops},
                   {"xoff_events", p.xoff_events},
                   {"storm", p.storm},
                   {"watchdog",
                    {{"trips", p.watchdog.trips},
                     {"mitigating", p.watchdog.mitigating},
                     {"dropped", p.watchdog.dropped}}}};
  for (const auto& [name, p] : s.ports)
    if (p.model == "ecn")
      ports[name]["ecn"] = {{"marking_p", p.ecn.marking_p},
                            {"ect", p.ecn.ect},
                            {"ce_marks", p.ecn.ce_marks},
                            {"not_ect", p.ecn.not_ect},
                            {"marked_by", p.ecn.marked_by}};
  for (const auto& [name, u] : s.upstreams)
    ups[name] = {{"pauses", u.pauses},
                 {"paused_ns", u.paused_ns},
                 {"paused_now", u.paused_now},
                 {"pause_expired", u.pause_expired},
                 {"repaused", u.repaused},
                 {"leftovers", u.leftovers},
                 {"by", u.by}};
  return {{"pid", s.pid},
          {"uptime_s", s.uptime_s},
          {"cpu_s", s.cpu_s},
          {"sched", s.sched},
          {"polls", s.polls},
          {"late_polls", s.late_polls},
          {"late_ms_max", s.late_ms_max},
          {"poll_ms_p99", s.poll_ms_p99},
          {"wake", s.wake},
          {"wake_checks", s.wake_checks},
          {"wakes", s.wakes},
          {"errors", s.errors},
          {"last_error", s.last_error},
          {"stopped", s.stopped},
          {"generation", s.generation},
          {"control_error", s.control_error},
          {"control_applied_ns", s.control_applied_ns},
          {"ports", ports},
          {"upstreams", ups}};
}

AgentStats stats_from_json(const json& j) {
  AgentStats s;
  if (!j.is_object()) return s;
  s.pid = j.value("pid", 0);
  s.uptime_s = j.value("uptime_s", 0.0);
  s.cpu_s = j.value("cpu_s", 0.0);
  s.sched = j.value("sched", "");
  s.polls = j.value("polls", uint64_t{0});
  s.late_polls = j.value("late_polls", uint64_t{0});
  s.late_ms_max = j.value("late_ms_max", 0.0);
  s.poll_ms_p99 = j.value("poll_ms_p99", 0.0);
  s.wake = j.value("wake", "");
  s.wake_checks = j.value("wake_checks", uint64_t{0});
  s.wakes = j.value("wakes", uint64_t{0});
  s.errors = j.value("errors", uint64_t{0});
  s.last_error = j.value("last_error", "");
  s.stopped = j.value("stopped", false);
  s.generation = j.value("generation", uint64_t{0});
  s.control_error = j.value("control_error", "");
  s.control_applied_ns = j.value("control_applied_ns", int64_t{0});
  if (auto it = j.find("ports"); it != j.end() && it->is_object())
    for (const auto& [name, p] : it->items()) {
      PortStats x{p.value("model", ""), p.value("backlog", uint64_t{0}),
                  p.value("backlog_max", uint64_t{0}), p.value("drops", uint64_t{0}),
                  p.value("xoff_events", uint64_t{0})};
      x.storm = p.value("storm", false);
      if (auto w = p.find("watchdog"); w != p.end() && w->is_object())
        x.watchdog = {w->value("trips", uint64_t{0}), w->value("mitigating", false),
                      w->value("dropped", uint64_t{0})};
      if (auto e = p.find("ecn"); e != p.end() && e->is_object())
        x.ecn = {e->value("marking_p", 0.0), e->value("ect", uint64_t{0}),
                 e->value("ce_marks", uint64_t{0}), e->value("not_ect", uint64_t{0}),
                 e->value("marked_by", "stage")};
      s.ports[name] = std::move(x);
    }
  if (auto it = j.find("upstreams"); it != j.end() && it->is_object())
    for (const auto& [name, u] : it->items()) {
      UpstreamStats x;
      x.pauses = u.value("pauses", uint64_t{0});
      x.paused_ns = u.value("paused_ns", int64_t{0});
      x.paused_now = u.value("paused_now", false);
      x.pause_expired = u.value("pause_expired", uint64_t{0});
      x.repaused = u.value("repaused", uint64_t{0});
      x.leftovers = u.value("leftovers", uint64_t{0});
      if (auto b = u.find("by"); b != u.end() && b->is_object())
        for (const auto& [port, n] : b->items()) x.by[port] = n.get<uint64_t>();
      s.upstreams[name] = std::move(x);
    }
  return s;
}

Result<AgentStats> read_stats(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail(path + ": cannot read the congestion agent's stats");
  auto j = json::parse(in, nullptr, false);
  if (j.is_discarded()) return fail(path + ": not JSON");
  return stats_from_json(j);
}

}  // namespace tb::congestion
