// Backend "netem": everything in the kernel (see backend.h for the layout and why netem sits
// above tbf). netem's jitter follows a normal distribution (a table sent with the qdisc, as
// `tc ... netem delay D J distribution normal`), so `jitter` is the standard deviation the
// scenario means; without a table netem would draw uniformly from +-jitter.
//
// Jitter never reorders by default (docs/scenario.md "jitter"), as in the userspace stage
// (stage/delay_line.h): a packet leaves no earlier than the one before it. netem gives that when
// it has a rate of its own: sch_netem.c netem_enqueue then takes the last queued packet's
// time_to_send as the reference ("delay -= last->time_to_send - now; delay = max(0, delay);
// now = last->time_to_send"), so each packet leaves at max(arrival + drawn delay, previous
// departure) + len / rate. Without a rate netem sorts its tfifo by the drawn time_to_send and
// packets closer together than the jitter leave out of order. So netem gets kOrderingRate, far
// above anything a veth carries, whose per-packet serialization (65 ns for a 64 KB GSO packet)
// is not a rate limit; the link's own rate stays with tbf. With LinkShape::reorder (scenario
// jitter_mode = "reorder") netem keeps its own order and the layouts take their own handles
// (qdisc_plan.h).
#include "shaping/backend.h"
#include "shaping/sizing.h"

namespace tb::shaping {

QdiscPlan build_netem(const LinkShape& s) {
  QdiscPlan p;
  p.backend = "netem";
  const uint64_t rate = bytes_per_second(s.rate);
  const bool impaired = s.delay.ns > 0 || s.jitter.ns > 0 || s.loss_pct > 0;
  const uint64_t own_rate = s.reorder ? 0 : kOrderingRate;
  netlink::NetemOptions netem{s.delay.ns, s.jitter.ns, s.loss_pct, 0, own_rate, {}};
  if (s.jitter.ns > 0) netem.jitter_table = netlink::normal_jitter_table();
  if (rate > 0 && !s.qos.empty()) {
    // The QoS classes take tbf's place under netem: the delay line first, then the classes
    // sharing the rate limit. netem's limit covers every class's buffer.
    const uint64_t leaves = uint64_t{limit_bytes(s)} * s.qos.classes.size();
    netem.limit = netem_limit_packets(s, leaves);
    p.nodes.push_back(TcNode{kRootParent, s.reorder ? kNetemReorderQosRoot : kNetemQosRoot, netem});
    add_qos_tree(p, s, s.reorder ? kNetemReorderQosClass : kNetemQosClass,
                 s.reorder ? kNetemReorderQosHtb : kNetemQosHtb);
  } else if (rate > 0) {
    // The same layout with or without delay, so a fault that adds or removes delay on a
    // rate-limited link changes parameters in place instead of grafting a new tree.
    const uint32_t limit = limit_bytes(s);
    netem.limit = netem_limit_packets(s, limit);
    p.nodes.push_back(TcNode{kRootParent, s.reorder ? kNetemReorderTbfRoot : kNetemTbfRoot, netem});
    p.nodes.push_back(TcNode{s.reorder ? kNetemReorderTbfClass : kNetemTbfClass,
                             s.reorder ? kNetemReorderTbfChild : kNetemTbfChild,
                             netlink::TbfOptions{rate, burst_bytes(s), limit}});
    const uint32_t child = s.reorder ? kNetemReorderTbfChild : kNetemTbfChild;
    add_red_child(p, s, child | 1, s.reorder ? kNetemReorderTbfRed : kNetemTbfRed);
    p.notes.push_back("buffer " + std::to_string(queue_bytes(s)) + " bytes (" +
                      format_duration(queue_latency(s)) +
                      " at the rate) in tbf; netem holds up to " + std::to_string(netem.limit) +
                      " packets");
  } else if (impaired) {
    netem.limit = netem_limit_packets(s, 0);
    p.nodes.push_back(TcNode{kRootParent, s.reorder ? kNetemReorderRoot : kNetemRoot, netem});
  }
  if (s.jitter.ns > 0 && s.reorder)
    p.notes.push_back(
        "jitter reorders (jitter_mode = \"reorder\"): each packet leaves at its own drawn delay, "
        "overtaking those before it that drew longer");
  else if (s.jitter.ns > 0)
    p.notes.push_back(
        "jitter keeps packets in order: a packet leaves no earlier than the one before it, so "
        "packets closer together than the jitter raise the mean delay and narrow its spread");
  return p;
}

}  // namespace tb::shaping
