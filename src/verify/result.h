// What `verify` found: per link class, the link and address measured, how (the request: probe
// counts, sizes, durations, buffers), what was measured, and the checks with their verdicts;
// and whether the whole run passed. report/verify.h renders it as a table and its
// JSON twin. Plain values: no locking; share a const one between threads freely.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/state.h"
#include "verify/classes.h"
#include "verify/host.h"
#include "verify/measure.h"
#include "verify/paths.h"
#include "verify/tolerance.h"

namespace tb::verify {

struct ClassResult {
  LinkClass cls;
  plan::Link link;  // the representative link; `emulated` holds the figures in force
  // The scenario's figures when `link set` changed the link (the checks judge `link.emulated`).
  std::optional<plan::EmulatedFigures> scenario;
  ProbeTarget target;  // empty addr when it could not be chosen
  MeasureRequest request;
  MeasureOutcome outcome;
  std::vector<Check> checks;
  // When a check of the first measurement failed, the class is measured once more and judged on
  // that: these are the first measurement's checks, reported beside (empty when measured once).
  std::vector<Check> first_checks;
  bool failed() const;  // a check failed or a step did
};

// One path class of `verify --paths`.
struct PathResult {
  PathPair pair;
  ProbeTarget target;  // a_netns/addr/b_netns; a_addr = the source address the replies go to
  Path out, back;      // the links crossed, there and back (the figures in force on each)
  MeasureRequest request;
  MeasureOutcome outcome;
  PathCheck check;
  std::optional<PathCheck> first_check;  // as ClassResult::first_checks
  std::vector<std::string> errors;       // the path could not be found
  bool failed() const;
};

// Whether a measurement is taken again before its verdict is believed: a check failed and every
// step ran. One probe train lasts 0.2-1 s, and a hiccup of the host inside it (another process's
// burst, a timer storm) moves a median by tens of µs where a sub-millisecond delay is allowed 45;
// a fault of the emulation fails the second measurement too. The second measurement is judged.
bool measure_again(const std::vector<Check>& checks, const MeasureOutcome& outcome);
bool measure_again(const PathCheck& check, const MeasureOutcome& outcome);

struct VerifyReport {
  std::string lab;
  std::string scenario;
  std::string shaping;      // the shaping backend as `status` reports it
  nlohmann::json backends;  // all of `status --json`'s "backends" (stage health included)
  bool quick = false;
  Settings settings;
  bool single_link = false;  // --link
  std::vector<ClassResult> classes;
  bool paths_mode = false;  // --paths: `paths` instead of `classes`
  std::vector<PathResult> paths;
  bool under_load = false;        // --under-load: measured while `load` flows ran
  std::vector<std::string> load;  // each flow and what it carried
  std::vector<std::string> load_errors;
  std::optional<HostLoad> host;  // over the measuring window
  bool interrupted = false;
  bool passed() const;
};

}  // namespace tb::verify
