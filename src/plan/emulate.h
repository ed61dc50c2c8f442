// Scale derivation: real-world link figures -> the figures the lab emulates, with a note for
// everything that cannot be emulated on a veth (sub-10 us delay and jitter, rates beyond what
// the host's veth path carries). Pure; thread-safe.
#pragma once

#include "plan/topology.h"
#include "scenario/model.h"
#include "shaping/link_shape.h"

namespace tb::plan {

// Below this a one-way delay (or jitter) is not emulated: a veth hop alone costs a few us and a
// timer-driven delay stage is accurate to ~0.15-0.25 ms (research/limits.md 2, 4a).
inline constexpr Duration kMinEmulatedDelay{10'000};
// A single veth TCP stream carries ~20 Gbit/s on the reference 2-core VM (limits.md 2).
using shaping::kHostVethRate;

RealFigures real_figures(const scenario::LinkProfile& p);
EmulatedFigures emulate(const scenario::LinkProfile& p, const scenario::Scale& s);

}  // namespace tb::plan
