// `testbedctl keeper` (internal: started by the first verb of a user who is not root) and the
// join every such verb makes first thing in main (core/userns.h, docs/design-rootless.md).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "core/error.h"
#include "core/userns.h"

namespace tb::cli {
namespace {

// The verb on the command line: the first argument that is not a global flag.
std::string_view verb_of(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] != '-') return argv[i];
  return {};
}

}  // namespace

std::optional<int> join_keeper_first(int argc, char** argv) {
  if (::geteuid() == 0) return std::nullopt;  // root (or already inside a keeper): no keeper
  const std::string_view verb = verb_of(argc, argv);
  if (verb.empty() || verb == "keeper") return std::nullopt;  // --help, --version, the keeper
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    std::fprintf(stderr, "testbedctl: readlink /proc/self/exe: cannot find this program\n");
    return kExitFailed;
  }
  exe[n] = '\0';
  auto k = userns::join_keeper(exe);
  if (k) return userns::fork_into_keeper();  // the child: nullopt, on to the verb
  // These run without a lab: outside the user namespace they still validate, plan, graph
  // (assuming a host), and doctor says why the namespace cannot be had (its userns row).
  if (verb == "validate" || verb == "plan" || verb == "graph" || verb == "doctor") {
    std::fprintf(stderr, "testbedctl: warning: %s; %s runs outside a user namespace\n",
                 k.error().message.c_str(), std::string(verb).c_str());
    return std::nullopt;
  }
  std::fprintf(stderr, "testbedctl: %s: %s\n", std::string(verb).c_str(),
               k.error().message.c_str());
  return k.error().exit_code;
}

void add_keeper(CLI::App& app, int& rc) {
  auto* keeper = app.add_subcommand("keeper", "");  // internal: started by join_keeper_first
  keeper->group("");
  keeper->callback([&rc] {
    const char* fd = std::getenv("TESTBEDCTL_KEEPER_READY");
    const int ready = fd && *fd ? std::atoi(fd) : -1;
    ::unsetenv("TESTBEDCTL_KEEPER_READY");
    rc = userns::run_keeper(ready);
  });
}

}  // namespace tb::cli
