// QoS classes under a link's rate limit (docs/scenario.md "QoS classes"): HTB, because this
// kernel has no prio qdisc and HTB's classes carry priorities of their own.
//
//   htb H: (default -> the default class)
//     class H:1   rate = ceil = the link's rate, so the classes together never exceed it
//       class H:10, H:20, ...  one per QoS class: rate = share x link (guaranteed), ceil =
//                              ceiling x link (borrowed from H:1 when others leave it unused),
//                              prio (0 first: HTB dequeues and lends to the lowest prio first)
//         bfifo leaf           the link's buffer (sizing.h limit_bytes), in bytes
//   filter u32 on H:, one per DSCP value of each class: ip dsfield (dscp << 2)/0xfc -> its class
//
// Traffic whose DSCP no class lists goes to the default class (HTB's defcls). With netem the
// tree sits at netem's class (backend_netem.cc), so the delay line comes first and the classes
// share the rate limit behind it, as tbf does without classes.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "shaping/backend.h"
#include "shaping/sizing.h"

namespace tb::shaping {
namespace {

constexpr uint16_t kFilterPrio = 1;

uint64_t fraction_of(uint64_t rate, double f) {
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(static_cast<double>(rate) * f)));
}

std::string fmt_percent(double f) {
  return fmt::format("{:g}%", std::round(f * 1e4) / 100);
}

}  // namespace

uint32_t qos_class_handle(uint32_t htb, size_t index) {
  return htb | static_cast<uint32_t>((index + 1) * 0x10);
}

uint32_t qos_leaf_handle(uint32_t htb, size_t index) {
  const uint32_t major = htb >> 16;
  const uint32_t base = major < 0x10 ? major << 4 : major;
  return tc_handle(base + static_cast<uint32_t>(index) + 1);
}

void add_qos_tree(QdiscPlan& p, const LinkShape& s, uint32_t parent, uint32_t htb) {
  const uint64_t rate = bytes_per_second(s.rate);
  const uint32_t burst = burst_bytes(s);
  auto quantum = [&](uint64_t r) { return htb_quantum(r, s.mtu); };
  const uint32_t top = htb | 1;
  p.nodes.push_back(TcNode{parent, htb,
                           netlink::HtbOptions{qos_class_handle(htb, s.qos.default_class) & 0xFFFF},
                           /*create_only=*/true, "qos"});
  p.nodes.push_back(TcNode{htb, top,
                           netlink::HtbClassOptions{rate, rate, burst, burst, quantum(rate), 0},
                           false, "the link's rate"});
  uint32_t node = 0;
  for (size_t i = 0; i < s.qos.classes.size(); ++i) {
    const QosClass& c = s.qos.classes[i];
    const uint64_t r = std::min(rate, fraction_of(rate, c.share));
    const uint64_t ceil = std::max(r, std::min(rate, fraction_of(rate, c.ceiling)));
    p.nodes.push_back(TcNode{top, qos_class_handle(htb, i),
                             netlink::HtbClassOptions{r, ceil, burst, burst, quantum(r),
                                                      static_cast<uint32_t>(c.priority)},
                             false, c.name});
    p.nodes.push_back(TcNode{qos_class_handle(htb, i), qos_leaf_handle(htb, i),
                             netlink::BfifoOptions{limit_bytes(s)}, false, c.name});
    for (int d : c.dscp)
      p.filters.push_back(
          {netlink::U32DscpFilter{htb, kFilterPrio, netlink::u32_handle(++node),
                                  static_cast<uint8_t>(d), qos_class_handle(htb, i)},
           c.name});
  }
  std::string classes;
  for (const auto& c : s.qos.classes) classes += (classes.empty() ? "" : ", ") + c.name;
  p.notes.push_back("QoS classes " + classes + " (HTB, by DSCP; unmarked traffic goes to " +
                    s.qos.classes[s.qos.default_class].name + "), each with a buffer of " +
                    std::to_string(queue_bytes(s)) + " bytes (" +
                    format_duration(queue_latency(s)) + " at the link's rate)");
}

std::string qos_text(const Qos& q) {
  std::string s;
  for (size_t i = 0; i < q.classes.size(); ++i) {
    const QosClass& c = q.classes[i];
    if (!s.empty()) s += ", ";
    s += c.name + " " + fmt_percent(c.share) + ".." + fmt_percent(c.ceiling) + " prio " +
         std::to_string(c.priority) + " dscp ";
    for (size_t k = 0; k < c.dscp.size(); ++k) s += (k ? "," : "") + std::to_string(c.dscp[k]);
    if (i == q.default_class) s += " (default)";
  }
  return s;
}

}  // namespace tb::shaping
