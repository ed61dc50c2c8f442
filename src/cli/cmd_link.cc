// `testbedctl link LAB set|reset|down|up A B`: change a live link in place. Rates and qdisc
// figures are replaced in the kernel (no delete and re-add), a delay stage's queue is changed by
// rewriting its config and SIGHUP, a loss rule is swapped; every change is an event
// (fault/live_link.h). On a link between two hosts of a lab over several (a VXLAN tunnel) the
// change is this host's part; the output says so and prints the other host's command.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/flag_checks.h"
#include "core/units.h"
#include "fault/live_link.h"

namespace tb::cli {
namespace {

struct LinkFlags {
  std::string lab, action, end_a, end_b;
  std::string rate_s, delay_s, jitter_s, loss_s;
};

std::string format_percent(double p) {
  return fmt::format("{:g}%", p);
}

fault::LinkAction parse_action(const std::string& a) {
  if (a == "reset") return fault::LinkAction::kReset;
  if (a == "down") return fault::LinkAction::kDown;
  if (a == "up") return fault::LinkAction::kUp;
  return fault::LinkAction::kSet;  // CLI11 admits only set, reset, down and up
}

int cmd_link(const LinkFlags& f) {
  fault::LinkChangeOptions o{f.lab, parse_action(f.action), f.end_a, f.end_b, {}};
  auto bad = [](const Error& e, const char* flag) {
    std::fprintf(stderr, "testbedctl: link --%s: %s\n", flag, e.message.c_str());
    return kExitBadInput;
  };
  if (!f.rate_s.empty()) {
    auto r = parse_rate(f.rate_s);
    if (!r) return bad(r.error(), "rate");
    o.change.rate = *r;
  }
  if (!f.delay_s.empty()) {
    auto d = parse_duration(f.delay_s);
    if (!d) return bad(d.error(), "delay");
    o.change.delay = *d;
  }
  if (!f.jitter_s.empty()) {
    auto d = parse_duration(f.jitter_s);
    if (!d) return bad(d.error(), "jitter");
    o.change.jitter = *d;
  }
  if (!f.loss_s.empty()) {
    auto l = parse_percent(f.loss_s);
    if (!l) return bad(l.error(), "loss");
    o.change.loss_pct = *l;
  }
  auto r = fault::change_live_link(o);
  if (!r) return report(r.error());
  std::string said = f.action;
  if (const auto& n = r->figures)
    said = "rate " + format_rate(n->rate) + ", delay " + format_duration(n->delay) + ", jitter " +
           format_duration(n->jitter) + ", loss " + format_percent(n->loss_pct);
  if (r->here.empty()) {
    std::printf("%s: %s\n", r->key.c_str(), said.c_str());
    return kExitOk;
  }
  // A link between hosts, changed on one of them: this host's part, and the other host's command.
  std::printf("%s: %s on %s\n", r->key.c_str(), said.c_str(), r->here.c_str());
  std::printf("  %s\n", r->elsewhere.c_str());
  if (f.action == "down")
    std::printf(
        "  until then: no traffic crosses the tunnel either way (the far end's packets find no "
        "device here), but the other host's routes still lead into it\n");
  else if (f.action == "set" || f.action == "reset")
    std::printf(
        "  until then the link is half changed: this host shaped what it holds, its end's egress "
        "and the direction it receives (delay stage, loss rule)\n");
  std::string cmd = "testbedctl link " + f.lab + " " + f.action + " " + f.end_a + " " + f.end_b;
  for (const auto& [flag, v] : {std::pair{"--rate", &f.rate_s},
                                {"--delay", &f.delay_s},
                                {"--jitter", &f.jitter_s},
                                {"--loss", &f.loss_s}})
    if (!v->empty()) cmd += std::string(" ") + flag + " " + *v;
  std::printf("  on the other host: sudo %s\n", cmd.c_str());
  return kExitOk;
}

}  // namespace

void add_link(CLI::App& app, int& rc) {
  auto f = std::make_shared<LinkFlags>();
  auto* link =
      app.add_subcommand("link", "change a live link in place: set, reset, down, up (root)");
  link->add_option("LAB", f->lab)->required()->check(lab_name());
  link->add_option("ACTION", f->action, "set | reset | down | up")
      ->required()
      ->check(CLI::IsMember({"set", "reset", "down", "up"}));
  link->add_option("A", f->end_a, "node, or node:interface")->required();
  link->add_option("B", f->end_b, "node, or node:interface")->required();
  link->add_option("--rate", f->rate_s, "set: emulated rate, e.g. 200mbit (0 = unlimited)")
      ->check(rate_text());
  link->add_option("--delay", f->delay_s, "set: one-way delay, e.g. 30ms")->check(duration_text());
  link->add_option("--jitter", f->jitter_s, "set: delay standard deviation, e.g. 1ms")
      ->check(duration_text());
  link->add_option("--loss", f->loss_s, "set: random loss, e.g. 0.5%")->check(percent_text());
  link->callback([f, &rc] { rc = cmd_link(*f); });
}

}  // namespace tb::cli
