// Backend "htb": the rate limit as one HTB class. htb 4: at the root sends everything to its
// default class 4:1 (rate = ceil = the link's rate, burst sized by sizing.h), whose leaf is a
// bfifo 40: of `limit` bytes instead of the default pfifo of txqueuelen packets.
//
// HTB has no Qdisc_ops.change (sch_htb.c htb_qdisc_ops), so its root is create-only; the class
// and the leaf change in place.
#include <algorithm>

#include "shaping/backend.h"
#include "shaping/sizing.h"

namespace tb::shaping {

QdiscPlan build_htb(const LinkShape& s) {
  QdiscPlan p;
  p.backend = "htb";
  p.residual = Residual{s.delay, s.jitter, s.loss_pct};
  const uint64_t rate = bytes_per_second(s.rate);
  if (rate > 0 && !s.qos.empty()) {
    add_qos_tree(p, s, kRootParent, kQosHtbRoot);
  } else if (rate > 0) {
    const uint32_t burst = burst_bytes(s);
    const uint64_t quantum = htb_quantum(rate, s.mtu);
    p.nodes.push_back(TcNode{kRootParent, kHtbRoot, netlink::HtbOptions{1}, /*create_only=*/true});
    p.nodes.push_back(
        TcNode{kHtbRoot, kHtbClass,
               netlink::HtbClassOptions{rate, rate, burst, burst, static_cast<uint32_t>(quantum)}});
    if (s.congestion.model == "ecn" && s.congestion.red)
      add_red_child(p, s, kHtbClass, kHtbRed);  // RED holds the class's queue
    else
      p.nodes.push_back(TcNode{kHtbClass, kHtbLeaf, netlink::BfifoOptions{limit_bytes(s)}});
    p.notes.push_back("buffer " + std::to_string(queue_bytes(s)) + " bytes (" +
                      format_duration(queue_latency(s)) + " at the rate)");
  }
  if (!p.residual.empty())
    p.notes.push_back(
        "htb emulates the rate only; delay, jitter and loss are the residual for "
        "the userspace delay stage");
  return p;
}

}  // namespace tb::shaping
