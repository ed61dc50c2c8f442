// exercise: classroom exercises (exercise/exercise.h). list | start N | check N | hint N |
// reset N | stop N, each with --name NAME for the student's lab (default ex<NN>).
// Exit codes: 0 pass (check) or done, 1 a failed check, 2 bad input, or a check not judged
// because the host was too busy to measure the lab.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/flag_checks.h"
#include "cli/progress.h"
#include "core/process.h"
#include "exercise/exercise.h"
#include "plan/host.h"
#include "report/exercise.h"

namespace tb::cli {
namespace {

struct ExerciseFlags {
  std::string which, name, shaping = "auto";
};

int cmd_list() {
  auto all = exercise::list_exercises(exercise::exercises_root());
  if (!all) return report(all.error());
  std::cout << report::exercise_list_text(*all);
  return kExitOk;
}

int cmd_start(const ExerciseFlags& f, bool reset) {
  Progress progress(std::string(reset ? "reset" : "start") + " exercise " + f.which);
  exercise::StartOptions o;
  o.root = exercise::exercises_root();
  o.which = f.which;
  o.name = f.name;
  o.shaping = f.shaping;
  o.reset = reset;
  o.progress = [&progress](size_t done, size_t total) { progress.step(done, total, "ops"); };
  auto r = exercise::start(o);
  progress.done();
  if (!r) return report(r.error());
  std::cout << report::exercise_start_text(*r);
  return kExitOk;
}

int cmd_check(const ExerciseFlags& f) {
  exercise::CheckTools tools;
  auto tb_rank = find_companion("tb-rank", "TESTBEDCTL_RANK");
  if (!tb_rank) return report(tb_rank.error());
  auto tb_probe = find_companion("tb-probe", "TESTBEDCTL_PROBE");
  if (!tb_probe) return report(tb_probe.error());
  tools.tb_rank = *tb_rank;
  tools.tb_probe = *tb_probe;
  std::fprintf(stderr, "exercise %s: measuring the lab (this takes a few seconds)\n",
               f.which.c_str());
  auto r = exercise::check(exercise::exercises_root(), f.which, f.name, tools);
  if (!r) return report(r.error());
  std::cout << report::exercise_check_text(*r);
  return r->exit_code();
}

int cmd_hint(const ExerciseFlags& f) {
  auto r = exercise::next_hint(exercise::exercises_root(), f.which, f.name);
  if (!r) return report(r.error());
  std::cout << report::exercise_hint_text(*r);
  return kExitOk;
}

int cmd_stop(const ExerciseFlags& f) {
  auto r = exercise::stop(exercise::exercises_root(), f.which, f.name);
  if (!r) return report(r.error());
  std::printf("lab %s %s; its exercise state is removed\n", r->lab.c_str(),
              r->was_up ? "is down" : "was not up");
  return kExitOk;
}

}  // namespace

void add_exercise(CLI::App& app, int& rc) {
  auto* ex = app.add_subcommand("exercise",
                                "classroom exercises: list, start, check, hint, "
                                "reset, stop (docs/exercises.md)");
  ex->require_subcommand(1);
  auto* list = ex->add_subcommand("list", "the exercises, their checks and titles");
  list->callback([&rc] { rc = cmd_list(); });
  struct Verb {
    const char* name;
    const char* help;
    int kind;  // 0 start, 1 check, 2 hint, 3 reset, 4 stop
  };
  for (const Verb v :
       {Verb{"start", "build the exercise's lab from your copy of its scenario (root)", 0},
        Verb{"check", "measure the live lab: PASS/FAIL with the values and the target (root)", 1},
        Verb{"hint", "reveal the next hint", 2},
        Verb{"reset", "your copy back to the starting scenario, hints cleared, lab rebuilt (root)",
             3},
        Verb{"stop", "take the lab down and remove its exercise state (root)", 4}}) {
    auto f = std::make_shared<ExerciseFlags>();
    auto* sub = ex->add_subcommand(v.name, v.help);
    sub->add_option("N", f->which, "the exercise: its number (2) or directory (02-wrong-nic)")
        ->required();
    sub->add_option("--name", f->name, "your lab's name (default ex<NN>)")->check(lab_name());
    if (v.kind == 0 || v.kind == 3)
      sub->add_option("--shaping", f->shaping, "auto|none|netem|tbf|htb")
          ->capture_default_str()
          ->check(checked_by(plan::check_shaping, "auto|none|netem|tbf|htb"));
    const int kind = v.kind;
    sub->callback([f, kind, &rc] {
      switch (kind) {
        case 0:
          rc = cmd_start(*f, false);
          break;
        case 1:
          rc = cmd_check(*f);
          break;
        case 2:
          rc = cmd_hint(*f);
          break;
        case 3:
          rc = cmd_start(*f, true);
          break;
        default:
          rc = cmd_stop(*f);
      }
    });
  }
}

}  // namespace tb::cli
