// The exercise use cases: a student's session on one lab (`testbedctl exercise ...`).
//
//   start  copies the exercise's scenario.toml to <state root>/<lab>/scenario.toml (the copy the
//          student edits; kept when it exists) and brings the lab up from the copy; on a lab
//          that is already this exercise's, it rebuilds it from the (edited) copy
//   check  measures the live lab as check.toml says (exercise/check.h) and says PASS or FAIL
//          with the values and the target; a FAIL reveals the next hint
//   hint   reveals the next hint (how many were shown is kept per lab)
//   reset  the copy back to the exercise's scenario, hints back to none, the lab rebuilt
//   stop   the lab down (lab/down.h) and the session's directory removed
// The state root is core/paths.h exercises (/var/lib/testbedctl/exercises for root;
// TESTBEDCTL_EXERCISE_STATE overrides it). The lab is the student's --name, else "ex<NN>". Labs
// live in their own namespaces, so two students' labs may use the same addresses (the scenario's
// address_space) without meeting. Every refusal is exit 2 naming what to do. Not thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "core/error.h"
#include "exercise/check.h"
#include "exercise/spec.h"
#include "lab/up.h"

namespace tb::exercise {

struct Session {
  std::string lab;
  std::string exercise;  // its id ("02-wrong-nic")
  int hints_shown = 0;
};

std::string state_root();
// The copy of the scenario the student edits.
std::string student_scenario(const std::string& lab);
// "ex02" for exercise 2, or `name` when given.
std::string lab_for(const Exercise& ex, const std::string& name);
// The lab's session; nullopt when there is none.
Result<std::optional<Session>> load_session(const std::string& lab);

struct StartOptions {
  std::string root;   // exercises_root()
  std::string which;  // "2", "02-wrong-nic"
  std::string name;   // the lab; "" = ex<NN>
  std::string shaping = "auto";
  bool reset = false;  // reset: the copy and hints back to the start
  std::function<void(size_t, size_t)> progress = nullptr;
};

struct StartReport {
  Exercise ex;
  Session session;
  std::string scenario_copy;
  bool rebuilt = false;  // the lab was up and was rebuilt from the copy
  lab::UpReport up;
};

Result<StartReport> start(const StartOptions& o);

struct HintReport {
  Exercise ex;
  Session session;
  std::optional<Hint> hint;  // none: every hint was shown already
  int number = 0;            // its number, 1-based
};

Result<HintReport> next_hint(const std::string& root, const std::string& which,
                             const std::string& name);

struct StopReport {
  std::string lab;
  bool was_up = false;
};

Result<StopReport> stop(const std::string& root, const std::string& which, const std::string& name);

// check: the session is looked up, the lab must be up.
Result<CheckReport> check(const std::string& root, const std::string& which,
                          const std::string& name, const CheckTools& tools);

}  // namespace tb::exercise
