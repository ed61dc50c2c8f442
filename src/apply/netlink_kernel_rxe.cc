// NetlinkKernel's CreateRxe: a Soft-RoCE device on a GPU's rail NIC through RDMA netlink
// (apply/rxe.h), and the StartDaemon ops it does not take (lab/daemons.h LabKernel starts those).
#include "apply/netlink_kernel.h"
#include "apply/rxe.h"

namespace tb::apply {

Status NetlinkKernel::submit_op(const plan::CreateRxe& op) {
  // The NIC must exist and be up: every earlier op acknowledged.
  TB_TRY(sync());
  auto d = add_rxe(op);
  if (!d) return std::unexpected(d.error());
  return {};
}

Status NetlinkKernel::undo_op(const plan::CreateRxe& op) {
  return remove_lab_rxe({RxeDevice{op.node, op.netns, op.ifname, op.name, -1, ""}});
}

Status NetlinkKernel::submit_op(const plan::StartDaemon& op) {
  return fail("daemon " + plan::daemon_name(op.daemon) +
              ": the netlink kernel makes kernel objects only; daemons are started by the lab's "
              "kernel (lab/daemons.h)");
}

Status NetlinkKernel::undo_op(const plan::StartDaemon&) {
  return {};  // nothing of it was made here
}

}  // namespace tb::apply
