#include "report/watch.h"

#include <algorithm>
#include <ctime>
#include <vector>

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

bool lossless_drops(const lab::WatchLink& w) {
  return (w.pause_ab.lossless && w.pause_ab.drops > 0) ||
         (w.pause_ba.lossless && w.pause_ba.drops > 0);
}

// A direction's sender: "59% 190/s" (share of the window paused, pauses received per second),
// "-" when it is not a queue the agent pauses.
std::string paused_cell(const lab::WatchPause& p, double window_s) {
  if (!p.pausable) return "-";
  if (window_s <= 0) return p.paused_now ? "now" : "?";
  return fmt::format("{:.0f}% {:.0f}/s", 100 * p.paused_frac,
                     static_cast<double>(p.pauses) / window_s);
}

json pause_json(const lab::WatchPause& p, double window_s) {
  json j = {{"pausable", p.pausable}, {"polled", p.polled}};
  if (p.pausable) {
    j["pauses_received"] = p.pauses;
    j["pauses_received_per_s"] = window_s > 0 ? static_cast<double>(p.pauses) / window_s : 0.0;
    j["paused_fraction"] = p.paused_frac;
    j["paused_now"] = p.paused_now;
  }
  if (p.polled) {
    j["lossless"] = p.lossless;
    j["xoff_events"] = p.xoff;
    j["pauses_sent"] = p.pauses_sent;
    j["pauses_sent_per_s"] = window_s > 0 ? static_cast<double>(p.pauses_sent) / window_s : 0.0;
    j["lossless_drops_since_watch_began"] = p.drops;  // the watchdog's are meant
  }
  if (p.ecn) {
    j["ecn"] = true;
    j["ce_marks"] = p.ce_marks;
    j["ect_packets"] = p.ect;
    j["ce_marks_per_s"] = window_s > 0 ? static_cast<double>(p.ce_marks) / window_s : 0.0;
  }
  return j;
}

// The ECN part: each ecn port's CE marks over the window ("" when the lab has none).
std::string watch_ecn_text(const lab::WatchFrame& f, size_t max_rows) {
  const double win = f.congestion_window_s;
  std::vector<std::string> rows;
  size_t ports = 0;
  for (const auto& w : f.links)
    for (int d = 0; d < 2; ++d) {
      const lab::WatchPause& p = d == 0 ? w.pause_ab : w.pause_ba;
      if (!p.ecn) continue;
      ++ports;
      // The counts are the window's (lab/watch.cc): none before the agent's second file.
      if (win <= 0 || (p.ce_marks == 0 && p.ect == 0)) continue;
      const std::string dir = d == 0 ? w.a + " -> " + w.b : w.b + " -> " + w.a;
      const double share = p.ect ? 100.0 * static_cast<double>(p.ce_marks) / p.ect : 0.0;
      rows.push_back(cell(dir, 40) + fmt::format("{:.0f} CE/s of {:.0f} ECT/s ({:.0f}%)\n",
                                                 static_cast<double>(p.ce_marks) / win,
                                                 static_cast<double>(p.ect) / win, share));
    }
  if (ports == 0) return "";
  std::string s = "ECN (ecn links): CE marks by the stage after each ecn port, same window\n";
  if (rows.empty()) return s + fmt::format("  no ECT packet through its {} ecn port(s)\n", ports);
  s += cell("PORT (sender -> receiver)", 40) + "MARKED\n";
  for (size_t i = 0; i < rows.size() && (!max_rows || i < max_rows); ++i) s += rows[i];
  if (max_rows && rows.size() > max_rows)
    s += fmt::format("  ... {} more ecn port(s) with ECT packets\n", rows.size() - max_rows);
  return s;
}

// The PFC part: the lossless links' pauses ("" when the lab has none).
std::string watch_pause_text(const lab::WatchFrame& f, size_t max_rows) {
  std::string s;
  std::vector<const lab::WatchLink*> rows;
  size_t lossless = 0;
  for (const auto& w : f.links) {
    if (!w.congestion()) continue;
    const bool ecn_only = (w.pause_ab.ecn || !w.pause_ab.polled) &&
                          (w.pause_ba.ecn || !w.pause_ba.polled) && !w.pause_ab.pausable &&
                          !w.pause_ba.pausable;
    if (ecn_only) continue;
    ++lossless;
    if (w.pause_ab.any() || w.pause_ba.any()) rows.push_back(&w);
  }
  if (lossless == 0) return "";
  std::stable_sort(rows.begin(), rows.end(), [](const lab::WatchLink* x, const lab::WatchLink* y) {
    const double px = std::max(x->pause_ab.paused_frac, x->pause_ba.paused_frac);
    const double py = std::max(y->pause_ab.paused_frac, y->pause_ba.paused_frac);
    if (px != py) return px > py;
    return x->pause_ab.pauses_sent + x->pause_ba.pauses_sent >
           y->pause_ab.pauses_sent + y->pause_ba.pauses_sent;
  });
  const double win = f.congestion_window_s;
  s += win > 0 ? fmt::format(
                     "PFC (lossless links): the congestion agent's counters over its last "
                     "{:.1f} s\n",
                     win)
               : std::string(
                     "PFC (lossless links): the congestion agent's counters (one stats "
                     "file so far: no window yet)\n");
  if (f.congestion == congestion::Source::kStale) s += "  STALE: " + f.congestion_why + "\n";
  if (rows.empty())
    return s + fmt::format("  no pause, XOFF or drop on its {} lossless link(s)\n", lossless);
  s += cell("LINK (A <-> B)", 31) + cell("A->B PAUSED", 11) + cell("B->A PAUSED", 11) +
       cell("SENT/s", 7) + "LOSSLESS DROPS\n";
  size_t shown = 0;
  for (const auto* w : rows) {
    if (max_rows && shown >= max_rows) break;
    ++shown;
    const uint64_t sent = w->pause_ab.pauses_sent + w->pause_ba.pauses_sent;
    const bool polled = w->pause_ab.polled || w->pause_ba.polled;
    const bool lossless_port = w->pause_ab.lossless || w->pause_ba.lossless;
    const uint64_t drops = (w->pause_ab.lossless ? w->pause_ab.drops : 0) +
                           (w->pause_ba.lossless ? w->pause_ba.drops : 0);
    s += cell(w->a + " <-> " + w->b, 31) + cell(paused_cell(w->pause_ab, win), 11) +
         cell(paused_cell(w->pause_ba, win), 11) +
         cell(!polled   ? "-"
              : win > 0 ? fmt::format("{:.0f}", static_cast<double>(sent) / win)
                        : "?",
              7) +
         (!lossless_port ? "-"
          : drops > 0    ? std::to_string(drops) + " VIOLATION"
                         : "0") +
         "\n";
  }
  if (rows.size() > shown)
    s += fmt::format("  ... {} more lossless link(s) with pauses\n", rows.size() - shown);
  if (lossless > rows.size())
    s += fmt::format("  {} other lossless link(s): no pause, XOFF or drop\n",
                     lossless - rows.size());
  return s;
}

}  // namespace

std::string watch_pfc_text(const lab::WatchFrame& f, size_t max_rows) {
  if (f.congestion == congestion::Source::kNoAgent) return "";
  if (f.congestion != congestion::Source::kCounted && f.congestion != congestion::Source::kStale)
    return "PFC (lossless links): no counts: " + f.congestion_why + "\n";
  return watch_pause_text(f, max_rows) + watch_ecn_text(f, max_rows);
}

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
         cell(std::to_string(w.drops + w.stage_drops) + (lossless_drops(w) ? "!" : ""), 7) +
         cell(w.backlog_bytes ? std::to_string(w.backlog_bytes) + "B" : "0", 9) +
         (w.stage_held < 0 ? "-" : std::to_string(w.stage_held)) + "\n";
  }
  if (idle_hidden) s += fmt::format("... {} more link(s), the least busy\n", idle_hidden);
  const std::string pfc = watch_pfc_text(f, 8);
  if (!pfc.empty()) s += "\n" + pfc;
  s += "\nlast events:\n";
  if (f.events.empty()) s += "  (none)\n";
  for (const auto& e : f.events) s += "  " + event_line(e) + "\n";
  s += "\nrates: the A end's byte counters (rtnetlink IFLA_STATS64) over the interval, A->B = its "
       "tx; USE = the busier direction / the emulated rate in force; DROPS since watch began: "
       "device and root-qdisc drops at both ends + the delay stage's; QUEUED: root-qdisc backlog "
       "at both ends; STAGE: packets the delay stage holds now (- = no stage)\n";
  if (!pfc.empty())
    s += "PFC: from the congestion agent's stats file (tb-probe congestion, rewritten every "
         "0.2 s), the difference between the files read at this frame and the last (about the "
         "interval); A->B PAUSED = the share of that window A's queue was "
         "paused and the pauses/s it received; SENT/s = pauses the link's switch port(s) sent "
         "upstream on XOFF; LOSSLESS DROPS since watch began at its lossless switch port(s), "
         "each one a violation (marked ! in DROPS); ECN: over the same window, the ECT packets "
         "the delay stage after each ecn port took and the share it marked CE\n";
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
  for (size_t i = 0; i < f.links.size(); ++i)
    if (f.links[i].congestion())
      links[i]["pause"] = {{"ab", pause_json(f.links[i].pause_ab, f.congestion_window_s)},
                           {"ba", pause_json(f.links[i].pause_ba, f.congestion_window_s)}};
  return {{"lab", lab},
          {"t_s", f.t_s},
          {"interval_s", f.interval_s},
          {"stages", f.stages},
          {"stages_running", f.stages_running},
          {"stage_restarts", f.stage_restarts},
          {"links", links},
          {"events", f.events},
          {"congestion",
           {{"state", congestion::source_name(f.congestion)},
            {"why", f.congestion_why},
            {"window_s", f.congestion_window_s},
            {"source", congestion::kCountersSource},
            {"backend", congestion::kCountersBackend}}},
          {"measured",
           "rates from the A end's IFLA_STATS64 byte counters over the interval (ab = its tx); "
           "drops since the first frame: device + root qdisc at both ends; stage_drops: the delay "
           "stage's full-queue and kernel drops"}};
}

}  // namespace tb::report
