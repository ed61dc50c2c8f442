// `testbedctl doctor [--json]`: probe what this kernel offers, print what each capability enables
// and what falls back, and which backends testbedctl would choose. Exit 0 when the essentials
// (root, netns, veth, bridge) are there, 2 otherwise.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "capability/capabilities.h"
#include "cli/commands.h"
#include "cli/exit_code.h"

namespace tb::cli {
namespace {

constexpr size_t kMaxDetailWidth = 72;  // longer details overflow their column, never truncate

std::string pad(const std::string& s, size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

std::string enables_or_fallback(const capability::Capability& c) {
  if (c.available) return c.enables;
  return "fallback: " + c.fallback + " (would enable: " + c.enables + ")";
}

void print_table(const capability::DoctorReport& r) {
  size_t wn = 4, wd = 6;
  for (const auto& c : r.capabilities) {
    wn = std::max(wn, c.name.size());
    wd = std::max(wd, std::min(c.detail.size(), kMaxDetailWidth));
  }
  std::printf("kernel: %s\n\n", r.kernel.c_str());
  std::printf("%s  %s  %s  %s\n", pad("NAME", wn).c_str(), "AVAILABLE", pad("DETAIL", wd).c_str(),
              "ENABLES / FALLBACK");
  for (const auto& c : r.capabilities) {
    std::printf("%s  %s  %s  %s\n", pad(c.name, wn).c_str(),
                pad(c.available ? "yes" : "no", 9).c_str(), pad(c.detail, wd).c_str(),
                enables_or_fallback(c).c_str());
  }
  std::printf("\nshaping backend: %s\ntransport: %s\nfailover: %s\n", r.chosen.shaping.c_str(),
              r.chosen.transport.c_str(), r.chosen.failover.c_str());
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

int cmd_doctor(bool json) {
  auto r = capability::make_report(capability::kernel_release(), capability::check_all());
  if (json)
    std::printf("%s\n", capability::to_json(r).dump(2).c_str());
  else
    print_table(r);
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
