// NetlinkKernel's AddStageRule: the netfilter rules that steer a link direction into its delay
// stage queue and drop its loss share. They are made by iptables and nft inside the namespace
// (stage/netfilter_rules.h says why no library interface exists); they carry the op's marker
// and go with it on undo (and with their namespace on down).
#include "apply/netlink_kernel.h"
#include "netlink/message.h"
#include "stage/netfilter_rules.h"

namespace tb::apply {

Status NetlinkKernel::submit_op(const plan::AddStageRule& op) {
  // The rules' tools run in a child of their own: ours must have sent everything first.
  TB_TRY(sync());
  const std::string what = "steer " + op.ifname + (op.egress ? " egress" : " ingress") +
                           " in netns " + op.netns + " into the delay stage";
  if (op.queue)
    if (auto r =
            stage::add_queue_rule(op.netns, {op.ifname, op.queue, op.egress}, op.marker + " queue");
        !r)
      return std::unexpected(with_context(r.error(), what));
  if (op.loss_ppm)
    if (auto r = stage::add_loss_rule(op.netns, {op.ifname, op.loss_ppm, op.egress},
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
