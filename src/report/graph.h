// What `graph` prints: a lab's topology as Graphviz dot or Mermaid, nodes grouped by region
// and links labelled with their tier and emulated rate. Pure functions; thread-safe.
#pragma once

#include <string>

#include "plan/topology.h"

namespace tb::report {

std::string graph_dot(const std::string& lab, const plan::Topology& t);
std::string graph_mermaid(const std::string& lab, const plan::Topology& t);

}  // namespace tb::report
