#include "report/run.h"

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
  for (const auto& v : r.verdicts)
    s += fmt::format("expect {} {}\n", v.ok ? "ok    " : "FAILED", v.text);
  for (const auto& e : r.errors) s += "error: " + e + "\n";
  s += "results: " + r.results_dir + "\n";
  return s;
}

}  // namespace tb::report
