// `testbedctl doctor [--json]`: probe what this kernel offers, print what each capability enables
// and what falls back, and which backends testbedctl would choose. Exit 0 when the essentials
// (root, netns, veth, bridge) are there, 2 otherwise.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "capability/capabilities.h"
#include "capability/host_cache.h"
#include "cli/commands.h"
#include "cli/exit_code.h"
#include "lab/state.h"
#include "report/doctor.h"

namespace tb::cli {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

int cmd_doctor(bool json) {
  auto r = capability::make_report(capability::kernel_release(), capability::check_all());
  // What up and plan use for the rest of this boot (capability/host_cache.h): doctor's answer.
  if (::geteuid() == 0)
    capability::write_host_cache(lab::run_root(), capability::host_cache_key(),
                                 capability::host_caps_from(r.capabilities));
  if (json)
    std::printf("%s\n", capability::to_json(r).dump(2).c_str());
  else
    std::fputs(report::doctor_text(r).c_str(), stdout);
  std::fflush(stdout);
  if (::geteuid() != 0)
    return report(
        Error{"doctor needs root for real probes (it creates throwaway namespaces); the "
              "probes that need root say so above; run it with sudo",
              0, kExitBadInput});
  if (!r.usable())
    return report(Error{"this environment cannot build labs: missing " +
                            join(r.missing_essentials) + " (see DETAIL above)",
                        0, kExitBadInput});
  return kExitOk;
}

}  // namespace

void add_doctor(CLI::App& app, int& rc) {
  auto json = std::make_shared<bool>(false);
  auto* doctor = app.add_subcommand("doctor", "probe what this kernel offers and what falls back");
  doctor->add_flag("--json", *json);
  doctor->callback([json, &rc] { rc = cmd_doctor(*json); });
}

}  // namespace tb::cli
