// testbedctl: the app, its global flags and logging; every verb adds itself (commands.h).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "version.h"  // generated at build time (cmake/version.cmake)

int main(int argc, char** argv) {
  // Before anything can start a thread: setns into a user namespace needs one (core/userns.h).
  if (auto rc = tb::cli::join_keeper_first(argc, argv)) return *rc;
  CLI::App app{"testbedctl — emulated AI-training clusters from network namespaces"};
  app.require_subcommand(1);
  // "testbedctl 0.1.0 (commit 1a2b3c4d5e6f)"; "-dirty" when built with uncommitted changes.
  app.set_version_flag("--version", "testbedctl " TB_VERSION " (commit " TB_COMMIT ")");
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "log every kernel operation");
  // Runs once the command line parsed, before the verb's callback.
  app.parse_complete_callback([&verbose] {
    // Logs go to stderr, so `--json` and `plan --format json` stay parseable with -v.
    spdlog::set_default_logger(spdlog::stderr_color_mt("testbedctl"));
    spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::warn);
    spdlog::set_pattern("%^%l%$: %v");
  });

  int rc = tb::kExitBadInput;  // stays so only if no verb ran
  using namespace tb::cli;
  // In the order `testbedctl --help` lists them.
  for (auto add :
       {add_validate, add_plan, add_graph,     add_up,     add_down,   add_clean,    add_status,
        add_exec,     add_link, add_supervise, add_doctor, add_verify, add_bench,    add_launch,
        add_fault,    add_run,  add_report,    add_watch,  add_train,  add_exercise, add_keeper})
    add(app, rc);

  // Parse errors (unknown flags, bad values, missing arguments): "testbedctl: <what>", for an
  // unknown flag the flags the verb does take, then where the valid values are listed.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    std::string msg = "testbedctl: " + std::string(e.what()) + "\n";
    const CLI::App* sub = a->get_subcommands().empty() ? nullptr : a->get_subcommands().front();
    const std::string verb = sub ? sub->get_name() : "";
    if (!sub && !a->remaining().empty()) {  // "testbedctl frobnicate", "testbedctl --bogus"
      std::string verbs;
      for (const CLI::App* v : a->get_subcommands([](const CLI::App* v) {
             return !v->get_group().empty();  // supervise is internal
           }))
        verbs += (verbs.empty() ? "" : ", ") + v->get_name();
      msg = "testbedctl: \"" + a->remaining().front() + "\" is not a verb; use one of " + verbs +
            " (global flags: -v/--verbose, --version)\n";
    }
    if (sub && dynamic_cast<const CLI::ExtrasError*>(&e)) {
      std::string flags;
      for (const CLI::Option* o : sub->get_options()) {
        if (!o->nonpositional() || o->get_name() == "--help") continue;
        std::string names = o->get_name(false, true);  // "-n,--iters" -> "-n/--iters"
        std::ranges::replace(names, ',', '/');
        flags += (flags.empty() ? "" : ", ") + names;
      }
      msg += "testbedctl: " + verb + " takes " + (flags.empty() ? "no flags" : flags) + "\n";
    }
    return msg + "Run `testbedctl " + (verb.empty() ? "" : verb + " ") +
           "--help` for every flag and its valid values.\n";
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : tb::kExitBadInput;
  }
  return rc;
}
