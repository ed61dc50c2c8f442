// The shaping part of a plan: one SetShape per link direction that has something to shape (the
// sending interface's egress qdisc tree, built by a shaping/ backend), and, where the backend
// leaves delay, jitter or loss over (kernels without netem), the delay stages (StartDaemon ops)
// and the rules that steer traffic into them. Pure: no system calls; goldens pin the result.
//
// Where a direction's residual goes: the receiving port's ingress (PREROUTING), unless that
// port is a bridge port — bridged frames never reach IP — in which case the delay's NFQUEUE
// rule sits on the sending port's egress (POSTROUTING) and the loss rule on the bridge port, in
// the bridge's namespace (an AddStageRule of its own; the kernel makes it an nft bridge family
// rule): a drop on the sender's egress would be a local error that TCP resends without a
// retransmission and a UDP sender sees as EPERM. The stage never reorders, so jitter_mode =
// "reorder" needs netem (bad input otherwise). A link whose two ends are both bridge ports has
// no IP hook on either side, so a residual there is refused (bad input) rather than silently
// not emulated. Rates above what a veth carries are left unlimited (the plan already notes
// "runs at host speed").
//
// Thread-safe (pure).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "plan/op.h"
#include "plan/topology.h"
#include "scenario/model.h"
#include "shaping/link_shape.h"

namespace tb::plan {

struct Plan;

// A link's emulated figures as one direction's shape (its QoS classes included).
shaping::LinkShape shape_of(const EmulatedFigures& f);

// The scenario's [qos] as the classes every WAN link gets; none when it is disabled.
shaping::Qos qos_classes(const scenario::Qos& q);

// For every link, in topology order: side a's egress, then side b's. Links with nothing to
// shape get an op too (its plan is the default qdisc), so applying them is uniform. Every
// link end must name a node of the topology (plan::compile guarantees it).
std::vector<SetShape> shape_ops(const Topology& topo, const std::string& backend);

// Where a link's figures were written ("scenario.toml:12:1: [profiles.vpc]"), for errors.
using LinkWhere = std::function<std::string(const Link&)>;

// Adds the ops and stages for `backend` ("netem", "tbf", "htb"; "" or "none" adds nothing).
// Unknown backends, shapes the kernel cannot take and residuals on a link between two bridge
// ports are bad input (exit code 2); `where`, when given, prefixes the error with the place the
// link's profile was written.
Status add_shaping(Plan& p, const std::string& backend, const LinkWhere& where = {});

}  // namespace tb::plan
