// Live link operations, shared by `link`, `fault` and `run`'s fault timeline: carrier down/up
// (the kernel drops routes through a down interface; up restores the plan's routes from the
// journal), figures set/reset in place (qdiscs replaced, stage queues re-read, loss rules
// swapped), and blackholing (the link stays up and drops everything: a 100 % loss rule tagged
// apart from the figures' loss rule, so set/reset never undo it). Every change is an event in
// <lab dir>/events.jsonl. The caller holds the lab lock where it needs one. Not thread-safe.
#pragma once

#include <string>

#include "apply/kernel.h"
#include "lab/link_change.h"
#include "lab/state.h"

namespace tb::fault {

std::string events_path(const std::string& lab);

// On a lab over several hosts (`up --host`, lab state's host) each host acts on its own part of
// a link: the ends whose nodes it built. A link between two hosts is a VXLAN tunnel with one end
// on each; down/up takes this host's end, figures change what this host holds of both
// directions (its end's egress qdisc, and the stage queue and loss rule of the direction it
// receives), and the same command on the other host does the rest. A lab on one host holds
// both ends. Pure.
struct EndsHere {
  bool a = true, b = true;     // which of the link's ends (plan::Link a, b) are on this host
  std::string here;            // this host ("" on a lab on one host)
  std::string a_host, b_host;  // the ends' hosts ("" on a lab on one host)
  bool both() const { return a && b; }
  bool none() const { return !a && !b; }
  // The host of the end that is not here ("" when both are, or neither).
  std::string far_host() const;
  // "" when both ends are here; else what this host did not touch, for people: "the end
  // bj/tr:ec is on host b: run the same command there for its part".
  std::string elsewhere(const plan::Link& l) const;
};
EndsHere ends_here(const lab::LabState& st, const plan::Link& l);
// Exit 2 naming the host that holds the link when neither of its ends is here.
Status require_an_end_here(const lab::LabState& st, const plan::Link& l);

// How long a link's up waits for its ends to report (apply::Kernel::set_links_up) before it
// puts the routes back anyway.
constexpr int kLinkUpWaitMs = 200;

// `first_effect_ns`, when given and still 0, gets the CLOCK_MONOTONIC time the first part of
// the change was in force (one end down, one direction's rule committed): when the fault began.
// Each acts on the ends on this host (ends_here) and refuses a link with none here (exit 2).
Status set_link_state(const lab::LabState& st, apply::Kernel& kernel, size_t link, bool up,
                      int64_t* first_effect_ns = nullptr);

// "set" merges `change` into the link's current figures; "reset" goes back to the scenario's.
// Returns the figures now in force.
Result<plan::EmulatedFigures> change_link(lab::LabState& st, apply::Kernel& kernel, size_t link,
                                          bool reset, const lab::FigureChange& change);

// The figures the link has now (the scenario's, or the last `link set`).
plan::EmulatedFigures current_figures(const lab::LabState& st, size_t link);

// Drops everything in both directions while the interfaces stay up (a gray failure).
Status set_blackhole(const lab::LabState& st, size_t link, bool on,
                     int64_t* first_effect_ns = nullptr);

}  // namespace tb::fault
