// fault: inject one fault into a live lab by hand, the same way a scenario's [[fault]]
// timeline does in `run`. Blocks while the fault lasts (--for, or a flap's cycles), printing
// each step, then reverts it; Ctrl-C reverts at once. Every step is an event in the lab's
// events.jsonl. Exit 0 when every step applied, 1 when one failed, 2 for bad input (and for a
// fault wholly on another host of a lab over several: on a link between hosts it acts on this
// host's end, and says what the other host must run; fault/fault.h resolve).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/flag_checks.h"
#include "cli/stop_signals.h"
#include "core/units.h"
#include "fault/by_hand.h"
#include "lab/state.h"
#include "scenario/fault_kind.h"
#include "scenario/names.h"

namespace tb::cli {
namespace {

struct FaultFlags {
  std::string kind;  // link-down link-up flap loss blackhole latency partition crash kill pfc-storm
  std::vector<std::string> args;  // A B | R1 R2 | NODE
  std::string for_text, period_text, delay_text, loss_text, link;
  int count = 0;
};

// The kind the verb's KIND names: a scenario kind name, or its verb name ("crash", "kill").
std::optional<scenario::FaultKind> verb_kind(const std::string& text) {
  for (const auto& k : scenario::fault_kinds())
    if (k.name == text || k.verb_name == text) return k.kind;
  return std::nullopt;
}

// "link-down, link-up, ..., crash or kill"; with a target, only the kinds acting on it.
std::string verb_kind_names(std::optional<scenario::FaultTarget> target = std::nullopt) {
  std::vector<std::string_view> names;
  for (const auto& k : scenario::fault_kinds())
    if (!target || k.target == *target) names.push_back(k.verb_name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

// Inject one fault by hand; blocks while it lasts, then reverts it.
int cmd_fault(const std::string& lab, const FaultFlags& ff) {
  using scenario::FaultKind;
  const auto kind = verb_kind(ff.kind);
  if (!kind)
    return report(
        Error{"unknown fault '" + ff.kind + "'; use " + verb_kind_names(), 0, kExitBadInput});
  scenario::Fault f;
  f.kind = *kind;
  const auto& args = ff.args;
  auto need = [&](size_t n, const char* what) -> std::optional<int> {
    if (args.size() == n) return std::nullopt;
    return report(Error{"fault " + ff.kind + " takes " + what, 0, kExitBadInput});
  };
  auto duration = [&](const std::string& text, const char* flag,
                      Duration* out) -> std::optional<int> {
    if (text.empty()) return std::nullopt;
    auto d = parse_duration(text);
    if (!d) return report(Error{std::string(flag) + ": " + d.error().message, 0, kExitBadInput});
    *out = *d;
    return std::nullopt;
  };
  switch (scenario::info(f.kind).target) {
    case scenario::FaultTarget::kLink:
      if (auto rc = need(2, "two link ends: A B (node or node:interface)")) return *rc;
      f.a = args[0];
      f.b = args[1];
      f.link = ff.link;
      break;
    case scenario::FaultTarget::kRegions:
      if (auto rc = need(2, "two regions: R1 R2")) return *rc;
      f.region_a = args[0];
      f.region_b = args[1];
      break;
    case scenario::FaultTarget::kNode:
      if (auto rc = need(1, "one node")) return *rc;
      f.node = args[0];
      break;
  }
  // A flag for another kind is refused, as the loader refuses the key in a [[fault]].
  auto only_for = [&](bool given, const char* flag, bool applies,
                      const std::string& kinds) -> std::optional<int> {
    if (!given || applies) return std::nullopt;
    return report(Error{std::string(flag) + ": only for " + kinds + " (not " + ff.kind + ")", 0,
                        kExitBadInput});
  };
  const bool link_kind = scenario::is_link_kind(f.kind);
  if (auto rc = only_for(!ff.link.empty(), "--link", link_kind,
                         "link faults, " + verb_kind_names(scenario::FaultTarget::kLink)))
    return *rc;
  if (auto rc = only_for(!ff.period_text.empty(), "--period", f.kind == FaultKind::kFlap, "flap"))
    return *rc;
  if (auto rc = only_for(ff.count != 0, "--count", f.kind == FaultKind::kFlap, "flap")) return *rc;
  if (auto rc = only_for(!ff.loss_text.empty(), "--loss", f.kind == FaultKind::kLoss, "loss"))
    return *rc;
  if (auto rc =
          only_for(!ff.delay_text.empty(), "--delay", f.kind == FaultKind::kLatency, "latency"))
    return *rc;
  if (auto rc = duration(ff.for_text, "--for", &f.duration)) return *rc;
  if (auto rc = duration(ff.period_text, "--period", &f.period)) return *rc;
  if (auto rc = duration(ff.delay_text, "--delay", &f.delay)) return *rc;
  f.count = ff.count;
  if (f.kind == FaultKind::kFlap && f.period.ns <= 0)
    return report(
        Error{"flap needs --period greater than 0, e.g. --period 500ms", 0, kExitBadInput});
  if (f.kind == FaultKind::kFlap && !scenario::kFlapCountRange.contains(f.count))
    return report(
        Error{"flap needs --count " + scenario::kFlapCountRange.text() + ", e.g. --count 6", 0,
              kExitBadInput});
  if (f.kind == FaultKind::kLoss) {
    if (ff.loss_text.empty())
      return report(Error{"loss needs --loss 0..100%, e.g. --loss 5%", 0, kExitBadInput});
    auto l = parse_percent(ff.loss_text);
    if (!l) return report(Error{"--loss: " + l.error().message, 0, kExitBadInput});
    f.loss_pct = *l;
  }
  // Nothing lifts a storm left in force but `down`: the verb ends it.
  if (f.kind == FaultKind::kPfcStorm && f.duration.ns <= 0)
    return report(
        Error{"pfc-storm needs --for greater than 0, e.g. --for 2s (the ToR port stays "
              "held until then; Ctrl-C ends it at once)",
              0, kExitBadInput});
  if (f.kind == FaultKind::kLatency && f.delay.ns <= 0)
    return report(
        Error{"latency needs --delay greater than 0, e.g. --delay 50ms", 0, kExitBadInput});
  auto st = lab::load_state(lab);
  if (!st) return report(Error{st.error().message, 0, kExitBadInput});
  if (st->phase != "up")
    return report(Error{"lab " + lab + " is " + st->phase + ", not up", 0, kExitBadInput});
  // The verb names "crash" and "kill" (not a scenario kind name) pick node-crash or rank-kill
  // by the node they are given: a switch or a GPU.
  if (ff.kind != scenario::name(*kind)) {
    const auto* n = st->topo.node(scenario::canonical_node(f.node));
    if (n) f.kind = n->kind == plan::NodeKind::kGpu ? FaultKind::kRankKill : FaultKind::kNodeCrash;
  }
  auto resolved = fault::resolve(*st, f);
  if (!resolved) return report(resolved.error());
  if (auto rc = require_root("fault")) return *rc;
  auto lock = lab::LabLock::acquire(lab);
  if (!lock) return report(lock.error());

  // A lab over several hosts: the part another host holds, and how to act on it there.
  for (const auto& e : resolved->elsewhere) std::printf("on this host only: %s\n", e.c_str());
  std::fflush(stdout);
  StopSignals signals;
  auto status = fault::inject_by_hand(
      *st, *resolved, signals.flag(), [&](const fault::Step& s, const Status& r, double seconds) {
        std::printf("%8.3f s  %s %s%s%s\n", seconds, s.inject ? "inject" : "revert",
                    resolved->label.c_str(),
                    s.cycle >= 0 ? (" (cycle " + std::to_string(s.cycle + 1) + ")").c_str() : "",
                    r ? "" : (": FAILED " + r.error().message).c_str());
        std::fflush(stdout);
      });
  if (stop_requested()) std::printf("interrupted: reverted what was in force\n");
  if (!status) return report(status.error());
  return status->all_applied ? kExitOk : kExitFailed;
}

}  // namespace

void add_fault(CLI::App& app, int& rc) {
  auto lab = std::make_shared<std::string>();
  auto flags = std::make_shared<FaultFlags>();
  FaultFlags& ff = *flags;
  auto* fault = app.add_subcommand(
      "fault", "inject a fault into a live lab; blocks while it lasts, then reverts it (root)");
  fault->add_option("LAB", *lab)->required()->check(lab_name());
  fault
      ->add_option("KIND", ff.kind,
                   "link-down|link-up|flap|loss|blackhole|latency A B; partition R1 R2; "
                   "crash|kill|pfc-storm NODE")
      ->required();
  fault->add_option("ARGS", ff.args, "link ends, regions or a node");
  fault->add_option("--for", ff.for_text, "how long before it is reverted (0: it stays)")
      ->check(duration_text());
  fault->add_option("--period", ff.period_text, "flap: one down+up cycle, e.g. 500ms")
      ->check(duration_text());
  fault->add_option("--count", ff.count, "flap: cycles")
      ->check(whole_in(scenario::kFlapCountRange));
  fault->add_option("--loss", ff.loss_text, "loss: e.g. 5%")->check(percent_text());
  fault->add_option("--delay", ff.delay_text, "latency: added one-way delay, e.g. 50ms")
      ->check(duration_text());
  fault->add_option("--link", ff.link, "the WAN link's name when several join two routers");
  fault->callback([lab, flags, &rc] { rc = cmd_fault(*lab, *flags); });
}

}  // namespace tb::cli
