// The congestion pictures of an HTML report (issue 32 P9; docs/design-congestion.md §5): the
// congestion tree — which switch port's XOFF paused which queue upstream of it, hop by hop, from
// a window's counters (summary.json's or bench.json's "congestion", congestion::to_json with
// window = true) — and, for a run, the pause timeline: each paused queue's episodes from the
// run's congestion.jsonl (congestion/episodes.h), a pfc-storm fault's window, and the PFC
// watchdog's detections and restores from events.jsonl. Made from the result's files only, like
// the rest of the report. Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "report/html.h"

namespace tb::report {

// Graphviz dot: a node per link end the window counts anything for (a switch port: its XOFF
// events, deepest backlog, drops, lossless violations, ECN marks, a storm and the watchdog's trips;
// a paused queue: its pauses and time paused), an edge per (port, queue it paused) labelled with
// the pauses, from the congested port toward its feeders. "" when the window paused nothing and
// no port was stormed or tripped the watchdog (or the counters are not there).
std::string congestion_tree_dot(const nlohmann::json& congestion);

// The sentence under the tree: how its figures were counted, and over what window.
std::string congestion_tree_method(const nlohmann::json& congestion);

// A run's pause timeline (Chart.js floating bars on the run's time axis, a row per queue);
// nullopt when the run has no episodes, no pfc-storm fault and no watchdog event.
std::optional<Chart> congestion_timeline_chart(const ReportInput& in);

}  // namespace tb::report
