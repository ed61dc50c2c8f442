// Probes for queueing disciplines (capability_probes.h): each adds one qdisc of its kind to a
// veth inside an anonymous network namespace in a forked child.
#include <linux/pkt_sched.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "capability/capability_checks.h"
#include "capability/capability_netlink.h"
#include "core/unique_fd.h"

namespace tb::capability::probe {
namespace {

constexpr uint32_t kRootHandle = 0x00010000;  // 1:0

Outcome qdisc_probe(const char* kind, uint32_t parent, uint32_t handle, FillFn options,
                    const char* where) {
  return in_child([=]() -> Outcome {
    auto nl = CheckSocket::open(NETLINK_ROUTE);
    if (!nl) return no(nl.error().message);
    if (auto r = nl->request(newlink_msg("veth", kProbeVeth, 0, fill_veth_peer), "create veth"); !r)
      return no(r.error().message);
    uint32_t ifindex = ::if_nametoindex(kProbeVeth);
    if (ifindex == 0) return no(std::string("look up ") + kProbeVeth);
    std::string what = std::string("add ") + kind + " qdisc";
    if (auto r = nl->request(newqdisc_msg(ifindex, parent, handle, kind, options), what); !r)
      return no(r.error().message);
    return yes(std::string("added ") + kind + " as the " + where +
               " qdisc of a veth in a throwaway netns");
  });
}

Outcome root_qdisc(const char* kind, FillFn options) {
  return qdisc_probe(kind, TC_H_ROOT, kRootHandle, options, "root");
}

}  // namespace

Outcome check_htb() {
  return root_qdisc("htb", fill_htb);
}
Outcome check_tbf() {
  return root_qdisc("tbf", fill_tbf);
}
Outcome check_netem() {
  return root_qdisc("netem", fill_netem);
}
Outcome check_fq_codel() {
  return root_qdisc("fq_codel", fill_fq_codel);
}
Outcome check_red() {
  return root_qdisc("red", fill_red);
}
Outcome check_prio() {
  return root_qdisc("prio", fill_prio);
}

// ingress and clsact sit at the same parent, ffff:fff1, with handle ffff:0 (tc/tc_qdisc.c).
Outcome check_ingress() {
  return qdisc_probe("ingress", TC_H_INGRESS, TC_H_MAKE(TC_H_INGRESS, 0), nullptr, "ingress");
}
Outcome check_clsact() {
  return qdisc_probe("clsact", TC_H_CLSACT, TC_H_MAKE(TC_H_CLSACT, 0), nullptr, "clsact");
}

// DCTCP as a socket's congestion control: setsockopt(TCP_CONGESTION, "dctcp") on a TCP socket in
// the child's throwaway namespace (the kernel loads tcp_dctcp where it is a module).
Outcome check_dctcp() {
  return in_child([]() -> Outcome {
    UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s) return no(std::string("socket: ") + std::strerror(errno));
    const char name[] = "dctcp";
    if (::setsockopt(s.get(), IPPROTO_TCP, TCP_CONGESTION, name, sizeof name - 1) != 0)
      return no(std::string("setsockopt TCP_CONGESTION dctcp: ") + std::strerror(errno));
    char got[16] = {};
    socklen_t len = sizeof got;
    if (::getsockopt(s.get(), IPPROTO_TCP, TCP_CONGESTION, got, &len) != 0 ||
        std::string(got) != "dctcp")
      return no(std::string("the socket's congestion control reads back as ") + got);
    return yes("a TCP socket in a throwaway netns took congestion control dctcp");
  });
}

}  // namespace tb::capability::probe
