// How reports show the congestion agent's counters (congestion/counters.h; design-congestion.md
// §5): `status`'s CONGESTION COUNTERS table and each link's `congestion` object in its JSON, and
// the one line bench, train and run print about a window's counters. Every figure names its
// source (the agent's stats file) and what it covers (since the agent started, or the window).
// Pure; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "congestion/counters.h"
#include "plan/topology.h"

namespace tb::report {

// `status`: one row per link end the agent counts anything for (pauses sent, XOFF events, the
// queue's maximum and drops for a switch port; pauses received and time paused for a paused
// queue), the idle ones counted in a line; why there are no counts when there are none; ""
// for a lab without an agent.
std::string congestion_status_text(const congestion::Counters& c, const plan::Topology& t);

// `status --json` links[].congestion: {"model", and with an agent "state", "why"?, "since_s",
// "a"/"b": the end's counters (null where the agent does not count that end)}.
nlohmann::json link_congestion_json(const congestion::Counters& c, const plan::Link& l);

// The line bench's footer, train's and run's text print for a window's counters
// (congestion::delta); "" for a lab without an agent.
std::string congestion_window_line(const congestion::Counters& window);

}  // namespace tb::report
