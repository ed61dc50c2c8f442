#include "report/run.h"

#include "congestion/episodes.h"
#include "report/congestion.h"
#include "report/format.h"

namespace tb::report {

std::string run_text(const experiment::RunResult& r) {
  const auto ms = one_decimal_or_dash;
  std::string s = fmt::format("\nRECOVERY (ms; CLOCK_MONOTONIC; baseline iteration {} ms)\n",
                              ms(r.recovery.baseline_iter_ms));
  s += fmt::format("{} {} {:>9} {:>9} {:>9} {:>9} {:>9}\n", pad("#", 3), pad("FAULT", 48), "DETECT",
                   "REROUTE", "OUTAGE", "STALL", "THRUPUT");
  for (const auto& f : r.recovery.faults)
    s += fmt::format("{:<3} {} {:>9} {:>9} {:>9} {:>9} {:>9}\n", f.fault.id,
                     pad(f.fault.target.substr(0, 48), 48), ms(f.detection_ms), ms(f.reroute_ms),
                     ms(f.outage_ms), ms(f.stall_ms),
                     f.degraded_fraction ? ms(*f.degraded_fraction * 100) + "%" : "-");
  s += "# " + r.summary.at("measured").get<std::string>() + "\n";
  if (const auto pfc = congestion_window_line(r.congestion); !pfc.empty())
    s += "# " + pfc +
         fmt::format(" ({} pause episode(s) in {})", r.congestion_episodes,
                     congestion::kEpisodesFile) +
         "\n";
  for (const auto& c : r.summary.value("checkpoints", nlohmann::json::array())) {
    s += fmt::format(
        "\nCHECKPOINT {} ({} -> {}, {} mode, {} real = {} emulated in {} shard(s), qos {}, "
        "over {})\n",
        c.value("workload", ""), c.value("from", ""), c.value("to", ""), c.value("mode", ""),
        format_size(c.value("real_bytes", uint64_t{0})),
        format_size(c.value("emulated_bytes", uint64_t{0})), c.value("shards", 0),
        c.value("qos", ""), c.value("wan", "").empty() ? "the WAN" : c.value("wan", ""));
    s += fmt::format("{:>4} {:<5} {:>11} {:>9} {:>11} {:>7} {:>8} {}\n", "REP", "KIND", "BYTES",
                     "SECONDS", "MBIT/S", "WAN%", "ON-TIME", "CHECKSUMS");
    for (const auto& rep : c.value("replications", nlohmann::json::array())) {
      const double sec = rep.value("seconds", 0.0);
      const uint64_t bytes = rep.value("payload_bytes", uint64_t{0});
      const std::string err = rep.value("error", "");
      s += fmt::format("{:>4} {:<5} {:>11} {:>9.3f} {:>11.1f} {:>6.1f}% {:>8} {}\n",
                       rep.value("rep", 0), rep.value("full", false) ? "full" : "incr", bytes, sec,
                       sec > 0 ? bytes * 8 / sec / 1e6 : 0.0,
                       rep.value("wan_utilisation", 0.0) * 100,
                       rep.value("on_time", false) ? "yes" : "LATE",
                       rep.value("ok", false) ? "match" : (err.empty() ? "MISMATCH" : err));
    }
    s += "# " + c.value("measured", "") + "\n";
    if (const auto& st = c.value("workload_steps", nlohmann::json()); st.is_object()) {
      auto part = [&](const char* k) {
        const auto& p = st[k];
        return p.value("steps", 0) == 0
                   ? std::string("none")
                   : fmt::format("median {:.1f} ms over {}", p.value("median_ms", 0.0),
                                 p.value("steps", 0));
      };
      s += fmt::format(
          "the run's workload iterations while a replication was in flight: {}; while none "
          "was: {}\n",
          part("during"), part("outside"));
      s += "# " + st.value("measured", "") + "\n";
    }
  }
  for (const auto& v : r.verdicts)
    s += fmt::format("expect {} {}\n", v.ok ? "ok    " : "FAILED", v.text);
  for (const auto& w : r.warnings) s += "warning: " + w + "\n";
  for (const auto& e : r.errors) s += "error: " + e + "\n";
  s += "results: " + r.results_dir + "\n";
  return s;
}

}  // namespace tb::report
