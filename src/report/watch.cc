#include "report/watch.h"

#include <ctime>

#include "report/format.h"

namespace tb::report {

using nlohmann::json;

std::string short_rate(double bps) {
  if (bps >= 1e9) return fmt::format("{:.2f}G", bps / 1e9);
  if (bps >= 1e6) return fmt::format("{:.1f}M", bps / 1e6);
  if (bps >= 1e3) return fmt::format("{:.1f}K", bps / 1e3);
  return fmt::format("{:.0f}", bps);
}

namespace {

std::string clock_of(const json& e) {
  const int64_t ms = e.value("t_unix_ms", int64_t{0});
  const std::time_t s = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}", b, static_cast<int>(ms % 1000));
}

// An event in one line: its name and its other short text fields.
std::string event_line(const json& e) {
  std::string s = clock_of(e) + "  " + e.value("event", "?");
  for (const auto& [k, v] : e.items()) {
    if (k == "event" || k.starts_with("t_") || !v.is_string()) continue;
    s += "  " + k + "=" + v.get<std::string>();
  }
  return s.size() > 150 ? s.substr(0, 147) + "..." : s;
}

}  // namespace

std::string watch_text(const std::string& lab, const lab::WatchFrame& f, size_t max_links) {
  std::string s = fmt::format(
      "watch {}   t={:.1f} s, every {:.1f} s   delay stages {}/{} running, {} restarts   (q or "
      "Ctrl-C quits)\n\n",
      lab, f.t_s, f.interval_s, f.stages_running, f.stages, f.stage_restarts);
  s += cell("LINK (A <-> B)", 44) + cell("TIER", 11) + cell("A->B", 9) + cell("B->A", 9) +
       cell("EMULATED", 9) + cell("USE", 5) + cell("DROPS", 7) + cell("QUEUED", 9) + "STAGE\n";
  size_t shown = 0, idle_hidden = 0;
  for (const auto& w : f.links) {
    if (max_links && shown >= max_links) {
      ++idle_hidden;
      continue;
    }
    ++shown;
    const double busiest = std::max(w.ab_bps, w.ba_bps);
    const std::string use =
        w.emulated_bps > 0 ? fmt::format("{:.0f}%", 100 * busiest / w.emulated_bps) : "-";
    std::string name = w.a + " <-> " + w.b;
    if (!w.seen)
      name += " (missing)";
    else if (!w.up)
      name += " (DOWN)";
    s += cell(name, 44) + cell(w.tier, 11) + cell(short_rate(w.ab_bps), 9) +
         cell(short_rate(w.ba_bps), 9) +
         cell(w.emulated_bps > 0 ? short_rate(w.emulated_bps) : "unlimited", 9) + cell(use, 5) +
         cell(std::to_string(w.drops + w.stage_drops), 7) +
         cell(w.backlog_bytes ? std::to_string(w.backlog_bytes) + "B" : "0", 9) +
         (w.stage_held < 0 ? "-" : std::to_string(w.stage_held)) + "\n";
  }
  if (idle_hidden) s += fmt::format("... {} more link(s), the least busy\n", idle_hidden);
  s += "\nlast events:\n";
  if (f.events.empty()) s += "  (none)\n";
  for (const auto& e : f.events) s += "  " + event_line(e) + "\n";
  s += "\nrates: the A end's byte counters (rtnetlink IFLA_STATS64) over the interval, A->B = its "
       "tx; USE = the busier direction / the emulated rate in force; DROPS since watch began: "
       "device and root-qdisc drops at both ends + the delay stage's; QUEUED: root-qdisc backlog "
       "at both ends; STAGE: packets the delay stage holds now (- = no stage)\n";
  return s;
}

json watch_json(const std::string& lab, const lab::WatchFrame& f) {
  json links = json::array();
  for (const auto& w : f.links)
    links.push_back({{"a", w.a},
                     {"b", w.b},
                     {"tier", w.tier},
                     {"ab_bps", w.ab_bps},
                     {"ba_bps", w.ba_bps},
                     {"emulated_bps", w.emulated_bps},
                     {"drops", w.drops},
                     {"stage_drops", w.stage_drops},
                     {"backlog_bytes", w.backlog_bytes},
                     {"stage_held", w.stage_held < 0 ? json(nullptr) : json(w.stage_held)},
                     {"up", w.up},
                     {"seen", w.seen}});
  return {{"lab", lab},
          {"t_s", f.t_s},
          {"interval_s", f.interval_s},
          {"stages", f.stages},
          {"stages_running", f.stages_running},
          {"stage_restarts", f.stage_restarts},
          {"links", links},
          {"events", f.events},
          {"measured",
           "rates from the A end's IFLA_STATS64 byte counters over the interval (ab = its tx); "
           "drops since the first frame: device + root qdisc at both ends; stage_drops: the delay "
           "stage's full-queue and kernel drops"}};
}

}  // namespace tb::report
