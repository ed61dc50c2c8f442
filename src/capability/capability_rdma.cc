// RDMA probes (capability_probes.h): does RDMA netlink answer, and does Soft-RoCE work between
// namespaces: two throwaway namespaces joined by a veth, an rxe device on each end (made the way
// iproute2's `rdma link add NAME type rxe netdev DEV` does, rdma/link.c link_add_netdev), and one
// RC send across (verbs_probe.h). Making the devices is not enough: Debian 12's 6.1 kernel makes
// them inside a namespace but never sends a packet from there.
#include <net/if.h>
#include <unistd.h>

#include <tuple>

#include "apply/rxe.h"
#include "capability/capability_checks.h"
#include "capability/capability_netlink.h"
#include "capability/rc_send.h"
#include "netlink/message.h"
#include "netlink/netns.h"
#include "netlink/rdma.h"
#include "netlink/socket.h"

namespace tb::capability::probe {
namespace {

Outcome rdma_socket_refused(const Error& e) {
  return no("no RDMA netlink: " + e.message +
            (e.sys_errno == EPROTONOSUPPORT
                 ? " (kernel built without CONFIG_INFINIBAND, or ib_core not loaded)"
                 : ""));
}

}  // namespace

Outcome check_rdma_netlink() {
  // Devices are listed from the caller's namespace; the child only bounds the wait.
  return in_child(
      []() -> Outcome {
        auto nl = CheckSocket::open(NETLINK_RDMA);
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

Outcome check_rdma_rxe() {
  return in_child(
      []() -> Outcome {
        // This child is in a fresh namespace A; B is a second one. One veth pair between them,
        // an rxe device on each end, and one RC send from A to B.
        auto a_fd = netlink::current_netns();
        if (!a_fd) return no(a_fd.error().message);
        UniqueFd b_fd;
        {
          auto sw = netlink::ScopedNetns::enter_new();
          if (!sw) return no(sw.error().message);
          auto b = netlink::current_netns();
          if (!b) return no(b.error().message);
          b_fd = std::move(*b);
        }
        constexpr int kIf = 10;
        auto rt_a = netlink::NlSocket::open();
        auto rt_b = netlink::NlSocket::open_in(b_fd.get());
        if (!rt_a || !rt_b) return no("netlink socket: " + (rt_a ? rt_b : rt_a).error().message);
        const Prefix pa{Ipv4{0xC613FF01}, 30}, pb{Ipv4{0xC613FF02}, 30};  // 198.19.255.1/.2
        auto step = [](Status r) { return r ? std::string() : r.error().message; };
        std::string err = step(rt_a->call(
            netlink::new_veth({kProbeVeth, kIf, -1}, {kProbeVethPeer, kIf, b_fd.get()}, 1500),
            "create veth across two namespaces"));
        if (err.empty()) err = step(rt_a->call(netlink::new_addr(kIf, pa), "address A"));
        if (err.empty()) err = step(rt_b->call(netlink::new_addr(kIf, pb), "address B"));
        if (err.empty())
          err = step(rt_b->call(netlink::set_link({.ifindex = kIf, .up = true}), "link up B"));
        if (!err.empty()) return no(err);
        auto rd_a = netlink::NlSocket::open(NETLINK_RDMA);
        if (!rd_a) return rdma_socket_refused(rd_a.error());
        auto rd_b = netlink::NlSocket::open_in(b_fd.get(), NETLINK_RDMA);
        if (!rd_b) return rdma_socket_refused(rd_b.error());
        // RDMA device names are global in the default (shared) netns mode: make ours unique.
        const std::string pid = std::to_string(::getpid());
        const std::string dev_a = "tbprobe" + pid + "a", dev_b = "tbprobe" + pid + "b";
        for (auto [sock, dev, ifname] :
             {std::tuple{&*rd_a, dev_a, kProbeVeth}, std::tuple{&*rd_b, dev_b, kProbeVethPeer}})
          if (auto r = sock->call(netlink::rdma_newlink(dev, "rxe", ifname),
                                  "rdma link add " + dev + " type rxe netdev " + ifname);
              !r)
            return no(r.error().message +
                      (r.error().sys_errno == EINVAL || r.error().sys_errno == EOPNOTSUPP
                           ? " (rdma_rxe not built in or not loadable)"
                           : ""));
        auto sent = rc_send_between(dev_a, pa.addr, dev_b, pb.addr);
        // Delete the devices now, synchronously: left to the namespaces' teardown they are
        // unregistered by a work queue after this child exits, and namespaces created meanwhile
        // (the lab `up` builds next) fail with ENODEV on this kernel (7.3, seen in the lab VM).
        std::string cleanup;
        for (auto [sock, dev] : {std::pair{&*rd_a, dev_a}, std::pair{&*rd_b, dev_b}}) {
          auto devs = netlink::list_rdma_devices(*sock, "probe netns");
          bool gone = false;
          if (!devs) cleanup += "; " + devs.error().message;
          for (const auto& d : devs ? *devs : std::vector<netlink::RdmaDevRecord>{})
            if (d.name == dev) {
              auto r = sock->call(netlink::rdma_dellink(d.index), "rdma link delete " + dev);
              if (!r) cleanup += "; " + r.error().message;
              gone = r.has_value();
            }
          if (!gone && devs) cleanup += "; " + dev + " not deleted";
        }
        if (!sent)
          return no("rxe devices were made in two namespaces, but " + sent.error().message +
                    ": RoCE between namespaces does not work on this kernel (expected on Debian "
                    "12's 6.1, whose rxe keeps its UDP socket in the initial namespace and sends "
                    "nothing from inside one); labs run TCP on the rail");
        return yes("a " + std::to_string(*sent) +
                   "-byte RC send crossed a veth from rxe in one namespace to rxe in another "
                   "(RoCE v2)" +
                   cleanup);
      },
      CLONE_NEWNET, std::chrono::milliseconds(20000));
}

}  // namespace tb::capability::probe
