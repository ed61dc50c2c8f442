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
#include "verify/measure.h"
#include "verify/tolerance.h"

namespace tb::verify {

struct ClassResult {
  LinkClass cls;
  plan::Link link;     // the representative link
  ProbeTarget target;  // empty addr when it could not be chosen
  MeasureRequest request;
  MeasureOutcome outcome;
  std::vector<Check> checks;
  bool failed() const;  // a check failed or a step did
};

struct VerifyReport {
  std::string lab;
  std::string scenario;
  std::string shaping;      // the shaping backend as `status` reports it
  nlohmann::json backends;  // all of `status --json`'s "backends" (stage health included)
  bool quick = false;
  Settings settings;
  bool single_link = false;  // --link
  std::vector<ClassResult> classes;
  bool interrupted = false;
  bool passed() const;
};

}  // namespace tb::verify
