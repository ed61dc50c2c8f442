// Backend "netem": everything in the kernel (see backend.h for the layout and why netem sits
// above tbf). netem's jitter follows a normal distribution (a table sent with the qdisc, as
// `tc ... netem delay D J distribution normal`), so `jitter` is the standard deviation the
// scenario means; without a table netem would draw uniformly from +-jitter.
#include "shaping/backend.h"
#include "shaping/sizing.h"

namespace tb::shaping {

QdiscPlan build_netem(const LinkShape& s) {
  QdiscPlan p;
  p.backend = "netem";
  const uint64_t rate = bytes_per_second(s.rate);
  const bool impaired = s.delay.ns > 0 || s.jitter.ns > 0 || s.loss_pct > 0;
  netlink::NetemOptions netem{s.delay.ns, s.jitter.ns, s.loss_pct, 0, 0, {}};
  if (s.jitter.ns > 0) netem.jitter_table = netlink::normal_jitter_table();
  if (rate > 0) {
    // The same layout with or without delay, so a fault that adds or removes delay on a
    // rate-limited link changes parameters in place instead of grafting a new tree.
    const uint32_t limit = limit_bytes(s);
    netem.limit = netem_limit_packets(s, limit);
    p.nodes.push_back(TcNode{kRootParent, kNetemTbfRoot, netem});
    p.nodes.push_back(
        TcNode{kNetemTbfClass, kNetemTbfChild, netlink::TbfOptions{rate, burst_bytes(s), limit}});
    p.notes.push_back("buffer " + std::to_string(queue_bytes(s)) + " bytes (" +
                      format_duration(queue_latency(s)) +
                      " at the rate) in tbf; netem holds up to " + std::to_string(netem.limit) +
                      " packets");
  } else if (impaired) {
    netem.limit = netem_limit_packets(s, 0);
    p.nodes.push_back(TcNode{kRootParent, kNetemRoot, netem});
  }
  if (s.jitter.ns > 0)
    p.notes.push_back(
        "netem sends packets in the order of their drawn delay: jitter reorders "
        "packets closer together than the jitter");
  return p;
}

}  // namespace tb::shaping
