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

// `first_effect_ns`, when given and still 0, gets the CLOCK_MONOTONIC time the first part of
// the change was in force (one end down, one direction's rule committed): when the fault began.
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
