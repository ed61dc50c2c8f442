// Rendering for the terminal and machines: lab summaries, status tables and their JSON twins,
// and topology graphs (Graphviz dot, Mermaid). Pure functions of the topology and live state.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "lab/live.h"
#include "lab/state.h"
#include "plan/topology.h"

namespace tb::cli {

// Live interface facts per namespace, as lab::read_live_interfaces() reported them.
using LiveState = lab::LiveInterfaces;

// What the backends are, in words, for every report ("topology: ...; shaping: ..."), with
// the health of the lab's delay stages when it has any.
nlohmann::json backends_json(const lab::LabState& st);
std::string backends_text(const lab::LabState& st);

std::string summary_text(const plan::Topology& t);
std::string status_text(const lab::LabState& s, const LiveState* live);
nlohmann::json status_json(const lab::LabState& s, const LiveState* live);

std::string graph_dot(const std::string& lab, const plan::Topology& t);
std::string graph_mermaid(const std::string& lab, const plan::Topology& t);

}  // namespace tb::cli
