// shape_ops: the SetShape ops for a topology, one per link direction: each end's interface
// shapes what it sends (egress) with that link's emulated figures. Pure: the planner decides
// where they go in a plan (plan::compile does not emit them yet).
//
// Thread-safe (pure).
#pragma once

#include <string>
#include <vector>

#include "plan/op.h"
#include "plan/topology.h"
#include "shaping/link_shape.h"

namespace tb::shaping {

// A link's emulated figures as one direction's shape.
LinkShape shape_of(const plan::EmulatedFigures& f);

// For every link, in topology order: side a's egress, then side b's. Links with nothing to
// shape get an op too (its plan is the default qdisc), so applying them is uniform. Every
// link end must name a node of the topology (plan::compile guarantees it).
std::vector<plan::SetShape> shape_ops(const plan::Topology& topo, const std::string& backend);

}  // namespace tb::shaping
