// What `status`, `up` and `plan` print about a lab: the one-line topology summary, the
// backends in words (with the health of the delay stages and daemons, read from the lab's
// supervisor and stage stats files), the status tables of one lab and the list of labs, each
// with its JSON twin. Pure functions of the topology, the recorded state and the live view,
// except backends_*, which read the supervisor's files; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/live.h"
#include "lab/state.h"
#include "lab/status.h"
#include "plan/topology.h"

namespace tb::report {

// Live interface facts per namespace (lab/live.h).
using LiveState = lab::LiveInterfaces;

// What the backends are, in words, for every report ("topology: ...; shaping: ..."), with
// the health of the lab's delay stages when it has any.
nlohmann::json backends_json(const lab::LabState& st);
std::string backends_text(const lab::LabState& st);
// How many of the lab's supervised processes are down (a stopped delay stage: its links drop
// everything; a stopped daemon: failover or routing no longer runs), from backends_json's
// document. `status` exits 1 when any is.
int processes_down(const nlohmann::json& backends);

// "43 nodes (20 gpu, 6 server, ...), 84 links".
std::string summary_text(const plan::Topology& t);
// Every figure `link set` can change ("rate R, delay D[, jitter J][, loss L%]"), as status and
// verify print them.
std::string figures_text(const plan::EmulatedFigures& f);

// One lab: header, backends, NODES and LINKS tables (live link state when `live` is given).
// `scenario`: the scenario's emulated figures of the links whose figures in force differ (by
// link index, lab::LabStatus::scenario_figures); such links are listed with both (text) and
// carry "in_force_differs" and "scenario_emulated" (JSON).
// `congestion`: the agent's counters (lab::LabStatus::congestion; nullptr: not read), shown as
// the CONGESTION COUNTERS table (text) and each link's `congestion` object (JSON,
// report/congestion.h), with the agent's state and totals as the top-level "congestion".
std::string status_text(const lab::LabState& s, const LiveState* live,
                        const std::map<size_t, plan::EmulatedFigures>& scenario = {},
                        const congestion::Counters* congestion = nullptr);
nlohmann::json status_json(const lab::LabState& s, const LiveState* live,
                           const std::map<size_t, plan::EmulatedFigures>& scenario = {},
                           const congestion::Counters* congestion = nullptr);

// Every lab that is up, one line each ("no labs are up" when none), and {"labs": [...]}.
std::string labs_text(const std::vector<lab::LabSummary>& labs);
nlohmann::json labs_json(const std::vector<lab::LabSummary>& labs);
// status --all-users: one line per lab, its user first; a user whose keeper could not be
// entered is one line with the reason.
std::string labs_by_user_text(const std::vector<lab::UserLabs>& users);
nlohmann::json labs_by_user_json(const std::vector<lab::UserLabs>& users);

}  // namespace tb::report
