// testbedctl's verbs. Each cmd_*.cc adds its subcommand(s) to the app: the flags (held in a
// struct local to that file), the help text, and a callback that runs the verb — it turns the
// flags into a use case's options, calls the use case (lab/, fault/, ...; never another verb)
// and prints the result — and stores its exit code (0 ok, 1 failed, 2 bad input or
// environment) in `rc`. main.cc calls every add_* in help order, then parses.
// Not thread-safe (one app per process).
#pragma once

#include <optional>

namespace CLI {
class App;
}

namespace tb::cli {

void add_validate(CLI::App& app, int& rc);   // cmd_scenario.cc
void add_plan(CLI::App& app, int& rc);       // cmd_scenario.cc
void add_graph(CLI::App& app, int& rc);      // cmd_scenario.cc
void add_up(CLI::App& app, int& rc);         // cmd_lab.cc
void add_down(CLI::App& app, int& rc);       // cmd_lab.cc
void add_clean(CLI::App& app, int& rc);      // cmd_lab.cc
void add_status(CLI::App& app, int& rc);     // cmd_lab.cc
void add_exec(CLI::App& app, int& rc);       // cmd_lab.cc
void add_link(CLI::App& app, int& rc);       // cmd_link.cc
void add_supervise(CLI::App& app, int& rc);  // cmd_supervise.cc (internal: started by up)
void add_doctor(CLI::App& app, int& rc);     // cmd_doctor.cc
void add_verify(CLI::App& app, int& rc);     // cmd_verify.cc
void add_bench(CLI::App& app, int& rc);      // cmd_bench.cc
void add_launch(CLI::App& app, int& rc);     // cmd_launch.cc
void add_fault(CLI::App& app, int& rc);      // cmd_fault.cc
void add_run(CLI::App& app, int& rc);        // cmd_run.cc
void add_report(CLI::App& app, int& rc);     // cmd_report.cc
void add_watch(CLI::App& app, int& rc);      // cmd_watch.cc
void add_train(CLI::App& app, int& rc);      // cmd_train.cc
void add_exercise(CLI::App& app, int& rc);   // cmd_exercise.cc
void add_keeper(CLI::App& app, int& rc);     // cmd_keeper.cc (internal: a user's keeper)

// A user who is not root joins (or starts) that user's keeper: call first thing in main, while
// the process has one thread. An exit code when the verb cannot go on, or, in the process that
// stayed outside the keeper's pid namespace, the verb's (userns::fork_into_keeper).
std::optional<int> join_keeper_first(int argc, char** argv);

}  // namespace tb::cli
