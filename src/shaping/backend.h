// Shaping backends: one per kernel mechanism, a registry by kind (STYLE rule 8, after iproute2's
// qdisc_util). Each turns a LinkShape into a QdiscPlan for one interface's egress:
//
//   netem  rate, delay, jitter, loss in the kernel. With a rate: netem at the root holds the
//          delay line (delay, normal jitter, loss) and feeds a tbf child that limits the rate
//          and owns the byte-sized buffer (the tc-netem(8) "rate control with tbf" recipe; the
//          queue that builds up behind the rate limit sits in tbf's bfifo, counted in bytes,
//          while netem's packet limit only has to cover its delay line). Without a rate: netem
//          alone. Needs sch_netem and sch_tbf.
//   tbf    rate only, with a BDP-sized buffer: the fallback where sch_netem is absent. Delay,
//          jitter and loss are left in QdiscPlan::residual for the userspace delay stage.
//   htb    rate only, as one HTB class with a byte-limited bfifo leaf; residual as tbf. Kept for
//          kernels without sch_tbf; tbf is the better single-rate limiter (research/limits.md 3).
//
// A shape with QoS classes (LinkShape::qos, WAN links) and a rate gets an HTB class tree instead
// of the single rate limit (backend_qos.cc): at the root for tbf and htb, under netem's class for
// netem. So every backend needs sch_htb for it (and cls_u32 for the filters).
//
// Adding a backend is a new backend_<kind>.cc and one row in backend.cc. The registry order is
// the order of preference pick_backend() uses. Bursts and limits come from sizing.h.
//
// Pure functions over plain values; thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "core/error.h"
#include "shaping/link_shape.h"
#include "shaping/qdisc_plan.h"

namespace tb::shaping {

struct Backend {
  std::string_view kind;                    // "netem", "tbf", "htb"
  std::string_view emulates;                // what it does in the kernel, for reports
  std::span<const std::string_view> needs;  // capability names (capability/capabilities.cc)
  QdiscPlan (*build)(const LinkShape&);     // called with a validated shape
};

std::span<const Backend> backend_registry();
// nullptr for an unknown kind.
const Backend* find_backend(std::string_view kind);
// "netem, tbf, htb": the known kinds, for error messages and --help.
std::string backend_kinds();
// The first backend (in registry order) whose every need is in `available`; nullptr if none.
const Backend* pick_backend(std::span<const std::string> available);

// A shape the kernel can take: rate 0 or at least 8 bit/s, delay and jitter >= 0, loss in
// 0..100, MTU in 68..65535. The error says which field and why (exit code 2).
Status validate(const LinkShape& s);

// validate() + find_backend() + build. Unknown backend or invalid shape: bad input.
Result<QdiscPlan> plan_qdiscs(const LinkShape& s, std::string_view backend);

// The QoS class tree (backend_qos.cc): htb `htb` at `parent` with s.qos's classes under the
// link's rate, leaves and DSCP filters. Needs s.qos non-empty and a rate.
void add_qos_tree(QdiscPlan& p, const LinkShape& s, uint32_t parent, uint32_t htb);
// An ecn port whose Congestion::red is set: a RED child `handle` at the TBF's class `parent`
// marking CE from kmin to kmax (netlink::red_options; the queue stays limit_bytes). Nothing
// otherwise.
void add_red_child(QdiscPlan& p, const LinkShape& s, uint32_t parent, uint32_t handle);
// Class i's handle under htb `htb` ("7:10" for i = 0), and its leaf qdisc's ("71:").
uint32_t qos_class_handle(uint32_t htb, size_t index);
uint32_t qos_leaf_handle(uint32_t htb, size_t index);
// "gold 30%..100% prio 0 dscp 46,48,56, silver ... (default), ...": for plans and status.
std::string qos_text(const Qos& q);

// The builders, one file each.
QdiscPlan build_netem(const LinkShape& s);
QdiscPlan build_tbf(const LinkShape& s);
QdiscPlan build_htb(const LinkShape& s);

}  // namespace tb::shaping
