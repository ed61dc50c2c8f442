// RDMA probes (capability_probes.h): does RDMA netlink answer, and can an rxe (Soft-RoCE) device
// be made on a veth inside a throwaway netns, the way iproute2's `rdma link add NAME type rxe
// netdev DEV` does it (rdma/link.c link_add_netdev).
#include <net/if.h>
#include <unistd.h>

#include "apply/capability_netlink.h"
#include "apply/capability_probes.h"

namespace tb::apply::probe {
namespace {

Outcome rdma_socket_refused(const Error& e) {
  return no("no RDMA netlink: " + e.message +
            (e.sys_errno == EPROTONOSUPPORT
                 ? " (kernel built without CONFIG_INFINIBAND, or ib_core not loaded)"
                 : ""));
}

// Deletes the probe's rxe device now; rxe also unregisters itself when its netdev goes with the
// namespace, which is the backstop if this fails. Says what happened, for the detail text.
std::string delete_rdma_dev(ProbeSocket& nl, const std::string& name) {
  auto devs = nl.rdma_devices();
  if (!devs) return "could not list devices to delete it (" + devs.error().message + ")";
  for (const auto& d : *devs) {
    if (d.name != name) continue;
    auto r = nl.request(rdma_dellink_msg(d.index), "rdma link delete " + name);
    return r ? "deleted it" : r.error().message + "; it goes when its netdev does";
  }
  return "did not find it to delete; it goes when its netdev does";
}

}  // namespace

Outcome probe_rdma_netlink() {
  // Devices are listed from the caller's namespace; the child only bounds the wait.
  return in_child(
      []() -> Outcome {
        auto nl = ProbeSocket::open(NETLINK_RDMA);
        if (!nl) return rdma_socket_refused(nl.error());
        auto devs = nl->rdma_devices();
        if (!devs) return no(devs.error().message);
        if (devs->empty()) return yes("RDMA netlink answers; no RDMA devices");
        std::string names;
        for (const auto& d : *devs) names += (names.empty() ? "" : ", ") + d.name;
        return yes("RDMA devices: " + names);
      },
      /*unshare_flags=*/0);
}

Outcome probe_rdma_rxe() {
  return in_child([]() -> Outcome {
    auto rt = ProbeSocket::open(NETLINK_ROUTE);
    if (!rt) return no(rt.error().message);
    if (auto r = rt->request(newlink_msg("veth", kProbeVeth, 0, fill_veth_peer), "create veth"); !r)
      return no(r.error().message);
    // The netdev is looked up in the RDMA socket's namespace, so open it here, after unshare.
    auto nl = ProbeSocket::open(NETLINK_RDMA);
    if (!nl) return rdma_socket_refused(nl.error());
    // RDMA device names are global in the default (shared) netns mode: make ours unique.
    std::string name = "tbprobe" + std::to_string(::getpid());
    if (auto r = nl->request(rdma_newlink_msg(name, "rxe", kProbeVeth),
                             "rdma link add " + name + " type rxe netdev " + kProbeVeth);
        !r)
      return no(r.error().message +
                (r.error().sys_errno == EINVAL || r.error().sys_errno == EOPNOTSUPP
                     ? " (rdma_rxe not built in or not loadable)"
                     : ""));
    return yes("created rxe device " + name + " on a veth in a throwaway netns and " +
               delete_rdma_dev(*nl, name) + " (RoCE traffic not tested)");
  });
}

}  // namespace tb::apply::probe
