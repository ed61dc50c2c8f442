// lab_shaping: turns a compiled plan's links into shaping ops: one SetShape per link
// direction that has something to shape (the sending interface's egress qdisc tree), and, where
// the backend leaves delay, jitter or loss over (kernels without netem), the delay stages and
// the rules that steer traffic into them. Pure: no system calls; goldens pin the result.
//
// Where a direction's residual goes: the receiving port's ingress (PREROUTING), unless that
// port is a bridge port — bridged frames never reach IP — in which case the sending port's
// egress (POSTROUTING). Rates above what a veth carries are left unlimited (the plan already
// notes "runs at host speed").
//
// Thread-safe (pure).
#pragma once

#include <string>

#include "core/error.h"
#include "plan/plan.h"

namespace tb::shaping {

// Adds the ops and stages for `backend` ("netem", "tbf", "htb"; "" or "none" adds nothing).
// Unknown backends and shapes the kernel cannot take are bad input (exit code 2).
Status add_shaping(plan::Plan& p, const std::string& backend);

}  // namespace tb::shaping
