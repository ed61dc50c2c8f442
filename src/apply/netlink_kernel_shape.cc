// NetlinkKernel's SetShape: an interface's egress qdisc tree, built by a shaping backend
// (shaping/backend.h) and sent as replace requests, so that applying a new shape to a shaped
// interface changes it in place (shaping/qdisc_plan.h explains the handles that make this so).
// QoS classes' u32 filters follow their qdisc. Undo deletes the root qdisc, which takes its
// children (classes, leaves, filters) with it and puts the default back.
#include <linux/pkt_sched.h>

#include "apply/netlink_kernel.h"
#include "apply/netlink_kernel_util.h"
#include "netlink/tc_message.h"
#include "shaping/backend.h"

namespace tb::apply {
namespace {

namespace nl = tb::netlink;
using detail::in_ns;
using detail::ok_if;

}  // namespace

Status NetlinkKernel::submit_op(const plan::SetShape& op) {
  const std::string what = "shape " + op.ifname + in_ns(op.netns);
  auto tree = shaping::plan_qdiscs(op.shape, op.backend);
  if (!tree) return std::unexpected(with_context(tree.error(), what));
  auto h = handle(op.netns);
  if (!h) return std::unexpected(with_context(h.error(), what));
  Ns& ns = **h;
  auto idx = ifindex_of(ns, op.ifname);
  if (!idx) return std::unexpected(with_context(idx.error(), what));
  if (tree->nodes.empty())  // nothing to shape: the default qdisc, whatever was there before
    return ok_if(ns.sock.call(nl::del_qdisc(*idx, TC_H_ROOT), what + " (default qdisc)"), ENOENT);
  for (const auto& node : tree->nodes) {
    const std::string w = what + " (" + shaping::to_text(node) + ")";
    const nl::TcPlace at{*idx, node.parent, node.handle};
    if (node.create_only) {
      // Synchronous: "File exists" is the answer when it is already there, and must not reach
      // the pipelined error path.
      TB_TRY(
          ok_if(ns.sock.call(nl::new_tc(at, node.options, nl::TcWrite::kCreateOnly), w), EEXIST));
    } else {
      TB_TRY(ns.sock.send(nl::new_tc(at, node.options), w));
    }
  }
  // QoS filters (shaping/backend_qos.cc) after the qdisc they hang on. Synchronous and
  // create-only: a u32 node's selector cannot change in place, and "File exists" means this
  // filter is there already (the tree was re-applied in place: a live link change).
  for (const auto& f : tree->filters) {
    const std::string w = what + " (" + shaping::to_text(f) + ")";
    TB_TRY(ok_if(ns.sock.call(nl::new_u32_dscp_filter(*idx, f.f), w), EEXIST));
  }
  return {};
}

Status NetlinkKernel::undo_op(const plan::SetShape& op) {
  const std::string what = "remove shaping from " + op.ifname + in_ns(op.netns);
  auto h = handle_if_exists(op.netns);
  if (!h) return std::unexpected(with_context(h.error(), what));
  if (!*h) return {};
  auto idx = ifindex_of(**h, op.ifname);
  if (!idx && idx.error().sys_errno == ENODEV) return {};  // the interface is gone already
  if (!idx) return std::unexpected(with_context(idx.error(), what));
  // Handle 0: whatever root is there. The default root has handle 0 and answers ENOENT.
  return ok_if((*h)->sock.call(nl::del_qdisc(*idx, TC_H_ROOT), what), ENOENT, ENODEV);
}

}  // namespace tb::apply
