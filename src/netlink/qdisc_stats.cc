#include "netlink/qdisc_stats.h"

#include <libmnl/libmnl.h>
#include <linux/gen_stats.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include <algorithm>
#include <cstring>

#include "netlink/attr.h"
#include "netlink/message_builder.h"

namespace tb::netlink {
namespace {

template <typename T>
T payload_as(const nlattr* a) {
  T v{};
  std::memcpy(&v, mnl_attr_get_payload(a), std::min<size_t>(mnl_attr_get_payload_len(a), sizeof v));
  return v;
}

void read_stats2(const nlattr* a, QdiscStats& q) {
  for_each_nested(a, [&](const nlattr* n) {
    switch (mnl_attr_get_type(n)) {
      case TCA_STATS_BASIC: {
        const auto b = payload_as<gnet_stats_basic>(n);
        q.bytes = b.bytes;
        q.packets = b.packets;
        break;
      }
      case TCA_STATS_QUEUE: {
        const auto g = payload_as<gnet_stats_queue>(n);
        q.qlen = g.qlen;
        q.backlog = g.backlog;
        q.drops = g.drops;
        q.requeues = g.requeues;
        q.overlimits = g.overlimits;
        break;
      }
      case TCA_STATS_APP:  // TCA_KIND came first (net/sched/sch_api.c tc_fill_qdisc)
        if (std::strcmp(q.kind, "red") == 0 && mnl_attr_get_payload_len(n) >= sizeof(tc_red_xstats))
          q.red_marked = payload_as<tc_red_xstats>(n).marked;
        break;
      default:
        break;
    }
  });
}

void read_tbf_options(const nlattr* a, QdiscStats& q) {
  uint64_t rate64 = 0;
  uint32_t buffer_ticks = 0;
  for_each_nested(a, [&](const nlattr* n) {
    if (mnl_attr_get_type(n) == TCA_TBF_PARMS) {
      const auto p = payload_as<tc_tbf_qopt>(n);
      q.tbf_rate = p.rate.rate;
      q.tbf_limit = p.limit;
      buffer_ticks = p.buffer;
    } else if (mnl_attr_get_type(n) == TCA_TBF_RATE64 &&
               mnl_attr_get_payload_len(n) >= sizeof(uint64_t)) {
      rate64 = payload_as<uint64_t>(n);
    }
  });
  if (rate64 > 0) q.tbf_rate = rate64;  // the 32-bit field holds ~0U then
  // The bucket is kept as the time to send it at the rate, in 64 ns psched ticks (sch_tbf.c
  // tbf_dump: PSCHED_NS2TICKS(q->buffer)); back to bytes, rounded to the nearest.
  const long double ns = static_cast<long double>(buffer_ticks) * 64;
  q.tbf_burst = static_cast<uint32_t>(
      std::min<long double>(ns * static_cast<long double>(q.tbf_rate) / 1e9L + 0.5L, 4e9L));
}

}  // namespace

NlMsg qdisc_dump_request() {
  MessageBuilder m(RTM_GETQDISC, NLM_F_REQUEST | NLM_F_DUMP);
  m.put_extra<tcmsg>()->tcm_family = AF_UNSPEC;
  return m.finish();
}

bool parse_qdisc_stats(const nlmsghdr* nlh, QdiscStats& q) {
  q = QdiscStats{};
  if (nlh->nlmsg_type != RTM_NEWQDISC || nlh->nlmsg_len < NLMSG_LENGTH(sizeof(tcmsg))) return false;
  const auto* t = static_cast<const tcmsg*>(mnl_nlmsg_get_payload(nlh));
  q.ifindex = t->tcm_ifindex;
  q.handle = t->tcm_handle;
  q.parent = t->tcm_parent;
  const nlattr* options = nullptr;
  for_each_attr(nlh, sizeof(tcmsg), [&](const nlattr* a) {
    switch (mnl_attr_get_type(a)) {
      case TCA_KIND: {
        const size_t n = std::min<size_t>(mnl_attr_get_payload_len(a), sizeof q.kind - 1);
        std::memcpy(q.kind, mnl_attr_get_payload(a), n);
        q.kind[n] = '\0';
        break;
      }
      case TCA_OPTIONS:
        options = a;
        break;
      case TCA_STATS2:
        read_stats2(a, q);
        break;
      default:
        break;
    }
  });
  if (options && std::strcmp(q.kind, "tbf") == 0) read_tbf_options(options, q);
  return true;
}

Status dump_qdisc_stats(NlSocket& socket, std::vector<QdiscStats>& out) {
  out.clear();
  return socket.dump(qdisc_dump_request(), "dump qdiscs", [&](const nlmsghdr* nlh) {
    QdiscStats q;
    if (parse_qdisc_stats(nlh, q)) out.push_back(q);
  });
}

}  // namespace tb::netlink
