// Backend "tbf": the rate limit alone, one tbf at the root. Its queue is the bfifo the kernel
// gives tbf, `limit` bytes long (sch_tbf.c tbf_change: fifo_create_dflt(sch, &bfifo_qdisc_ops,
// qopt->limit)); a change of rate or buffer resizes it in place (fifo_set_limit). With QoS
// classes the rate limit is the HTB class tree of backend_qos.cc instead (tbf has no classes).
#include <algorithm>

#include "shaping/backend.h"
#include "shaping/sizing.h"

namespace tb::shaping {

QdiscPlan build_tbf(const LinkShape& s) {
  QdiscPlan p;
  p.backend = "tbf";
  p.residual = Residual{s.delay, s.jitter, s.loss_pct};
  if (bytes_per_second(s.rate) > 0 && !s.qos.empty()) {
    add_qos_tree(p, s, kRootParent, kQosHtbRoot);
  } else if (bytes_per_second(s.rate) > 0) {
    TcNode& root = p.nodes.emplace_back();
    root.handle = kTbfRoot;
    root.options = netlink::TbfOptions{bytes_per_second(s.rate), burst_bytes(s), limit_bytes(s)};
    add_red_child(p, s, kTbfClass, kTbfRed);
    p.notes.push_back("buffer " + std::to_string(queue_bytes(s)) + " bytes (" +
                      format_duration(queue_latency(s)) + " at the rate)");
  }
  if (!p.residual.empty())
    p.notes.push_back(
        "tbf emulates the rate only; delay, jitter and loss are the residual for "
        "the userspace delay stage");
  return p;
}

void add_red_child(QdiscPlan& p, const LinkShape& s, uint32_t parent, uint32_t handle) {
  const Congestion& c = s.congestion;
  if (c.model != "ecn" || !c.red || bytes_per_second(s.rate) == 0) return;
  const uint32_t limit = limit_bytes(s);
  const auto kmax = static_cast<uint32_t>(std::min<uint64_t>(c.kmax, limit));
  const auto kmin = static_cast<uint32_t>(std::min<uint64_t>(c.kmin, kmax));
  p.nodes.push_back(TcNode{parent, handle,
                           netlink::red_options(kmin, kmax, c.pmax, limit, frame_bytes(s.mtu),
                                                bytes_per_second(s.rate))});
  p.notes.push_back("RED marks ECT packets CE from " + std::to_string(kmin) + " to " +
                    std::to_string(kmax) + " bytes of average queue (the kernel's own ECN)");
}

}  // namespace tb::shaping
