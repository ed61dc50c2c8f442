#include "report/exercise.h"

#include <fmt/format.h>

#include <filesystem>

namespace tb::report {

std::string exercise_list_text(const std::vector<exercise::Exercise>& all) {
  std::string out =
      fmt::format("{:<3} {:<24} {:<6} {:<6} {}\n", "N", "EXERCISE", "CHECK", "HINTS", "TITLE");
  for (const auto& e : all)
    out += fmt::format("{:<3} {:<24} {:<6} {:<6} {}\n", e.number, e.id,
                       e.check.measure == exercise::Measure::kBench ? "bench"
                       : e.check.measure == exercise::Measure::kRun ? "run"
                                                                    : "file",
                       e.hints.size(), e.title);
  if (all.empty()) out += "(no exercises)\n";
  return out;
}

std::string exercise_start_text(const exercise::StartReport& r) {
  std::string out = fmt::format("exercise {}: {}\n", r.ex.number, r.ex.title);
  out += fmt::format("lab {} {} from {} ({} ops in {:.1f} s)\n", r.session.lab,
                     r.rebuilt ? "rebuilt" : "up", r.scenario_copy, r.up.plan.ops.size(),
                     r.up.seconds);
  out += fmt::format(
      "your copy of the scenario: {} (edit it, then `exercise start {}{}` again "
      "to rebuild the lab from it)\n",
      r.scenario_copy, r.ex.number,
      r.session.lab == exercise::lab_for(r.ex, "") ? "" : " --name " + r.session.lab);
  if (r.ex.check.measure == exercise::Measure::kFile)
    out +=
        fmt::format("your measurements file: {}/{}\n",
                    std::filesystem::path(r.scenario_copy).parent_path().string(), r.ex.check.file);
  out += fmt::format("task sheet: {}\n\n{}", r.ex.task_path(), r.ex.sheet);
  return out;
}

std::string exercise_hint_text(const exercise::HintReport& r) {
  if (!r.hint)
    return fmt::format("exercise {}: all {} hints are shown already (task sheet: {})\n",
                       r.ex.number, r.ex.hints.size(), r.ex.task_path());
  return fmt::format("exercise {}, {} of {}:\n{}", r.ex.number, r.hint->title, r.ex.hints.size(),
                     r.hint->text);
}

std::string exercise_check_text(const exercise::CheckReport& r) {
  const char* word = r.verdict == exercise::Verdict::kPass   ? "PASS"
                     : r.verdict == exercise::Verdict::kFail ? "FAIL"
                                                             : "NOT JUDGED";
  std::string out = fmt::format("exercise {} on lab {}: {}\n", r.exercise, r.lab, word);
  for (const auto& v : r.values) {
    const std::string measured =
        v.measured ? fmt::format("{:.1f} {}", *v.measured, v.unit) : std::string("none");
    const std::string target =
        // A file check's target is the answer: not shown, only whether the value is within.
        v.within > 0 ? std::string("the lab's own figure, within tolerance")
                     : fmt::format("{} {:.1f} {}", v.at_least ? ">=" : "<=", v.target, v.unit);
    out += fmt::format("  {:<18} {:>16}  target {}  {}\n", v.name, measured, target,
                       v.ok ? "ok" : "MISSED");
    out += fmt::format("  {:<18} {}\n", "", v.how);
  }
  if (!r.diagnosis.empty()) out += "  " + r.diagnosis + "\n";
  if (r.host.cpu_busy >= 0)
    out += "  host: " + r.host.text() + (r.host.host_bound ? " (host-bound)" : "") + "\n";
  out += "  measured: " + r.method + "\n";
  if (!r.results_dir.empty()) out += "  results: " + r.results_dir + "\n";
  if (r.next_hint)
    out += fmt::format("next hint ({}):\n{}", r.next_hint->title, r.next_hint->text);
  else if (r.verdict == exercise::Verdict::kFail)
    out += "no hints left; the task sheet says what to look at\n";
  return out;
}

}  // namespace tb::report
