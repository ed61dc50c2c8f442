// libFuzzer target: what `testbedctl validate FILE` does with a file's bytes (cli/cmd_scenario.cc):
// scenario::load reads the file and hands its text to load_text, whose scenario goes to
// plan::compile. Any input must end in a value or a bad-input Error (exit code 2) with a
// message; a crash, sanitizer report, leak, hang or memory blowup is a finding.
//
// Built only with -DTB_FUZZ=ON; run by scripts/fuzz (docs/scenario.md, "Fuzzing").
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "plan/plan.h"
#include "scenario/loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The contract: bad input is exit code 2 with a message, from the loader or the planner.
  auto bad = [](const tb::Error& e) {
    return e.exit_code == tb::kExitBadInput && !e.message.empty();
  };
  auto s = tb::scenario::load_text(text, "fuzz.toml");
  if (!s) {
    if (!bad(s.error())) std::abort();
    return 0;
  }
  auto p = tb::plan::compile(*s);
  if (!p && !bad(p.error())) std::abort();
  return 0;
}
