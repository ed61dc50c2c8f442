// NetlinkKernel's AddStageRule: the netfilter rules that steer a link direction into its delay
// stage queue and drop its loss share (in the bridge family when the op's interface is a bridge
// port, which the kernel is asked here). They are made by iptables and nft inside the namespace
// (stage/netfilter_rules.h says why no library interface exists); they carry the op's marker
// and go with it on undo (and with their namespace on down).
#include "apply/netlink_kernel.h"
#include "netlink/dump.h"
#include "netlink/message.h"
#include "stage/netfilter_rules.h"

namespace tb::apply {
namespace {

// Whether interface `ifindex` of the socket's namespace is a port of a bridge.
Result<bool> bridge_port(netlink::NlSocket& sock, int ifindex, const std::string& where) {
  auto link = netlink::query_link(sock, ifindex, where);
  if (!link) return std::unexpected(link.error());
  if (link->master == 0) return false;
  auto master = netlink::query_link(sock, link->master, where);
  if (!master) return std::unexpected(master.error());
  return master->kind == "bridge";
}

}  // namespace

Status NetlinkKernel::submit_op(const plan::AddStageRule& op) {
  // The rules' tools run in a child of their own: ours must have sent everything first.
  TB_TRY(sync());
  const std::string what =
      (op.queue ? "steer " + op.ifname + (op.egress ? " egress" : " ingress") + " in netns " +
                      op.netns + " into the delay stage"
                : "drop a loss share on " + op.ifname + " in netns " + op.netns);
  if (op.queue)
    if (auto r =
            stage::add_queue_rule(op.netns, {op.ifname, op.queue, op.egress}, op.marker + " queue");
        !r)
      return std::unexpected(with_context(r.error(), what));
  // A loss rule on a bridge port goes in the bridge family (its frames never reach IP): the
  // planner puts the loss of a direction into a bridge port there (plan/shaping.h).
  bool bridge = false;
  if (op.loss_ppm && !op.egress) {
    auto h = handle(op.netns);
    if (!h) return std::unexpected(with_context(h.error(), what));
    auto idx = ifindex_of(**h, op.ifname);
    if (!idx) return std::unexpected(with_context(idx.error(), what));
    auto port = bridge_port((*h)->sock, *idx, "netns " + op.netns);
    if (!port) return std::unexpected(with_context(port.error(), what));
    bridge = *port;
  }
  if (op.loss_ppm)
    if (auto r = stage::add_loss_rule(op.netns, {op.ifname, op.loss_ppm, op.egress, bridge},
                                      op.marker + " loss");
        !r)
      return std::unexpected(with_context(r.error(), what));
  return {};
}

Status NetlinkKernel::undo_op(const plan::AddStageRule& op) {
  auto h = handle_if_exists(op.netns);
  if (!h) return std::unexpected(h.error());
  if (!*h) return {};  // the namespace, and its rules, are gone
  return stage::remove_marked_rules(op.netns, op.marker);
}

Status NetlinkKernel::set_link_up(const std::string& netns, const std::string& ifname, bool up) {
  const std::string what =
      std::string("set ") + ifname + (up ? " up" : " down") + " in netns " + netns;
  TB_TRY(sync());
  auto h = handle(netns);
  if (!h) return std::unexpected(with_context(h.error(), what));
  auto idx = ifindex_of(**h, ifname);
  if (!idx) return std::unexpected(with_context(idx.error(), what));
  return (*h)->sock.call(netlink::set_link({.ifindex = *idx, .up = up}), what);
}

}  // namespace tb::apply
