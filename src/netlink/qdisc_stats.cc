#include "netlink/qdisc_stats.h"

#include <libmnl/libmnl.h>
#include <linux/gen_stats.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include <algorithm>
#include <cstring>

namespace tb::netlink {
namespace {

// The attributes from `first` up to `end`, each passed to `each` (libmnl's for_each macros
// assign a void*, which C++ does not convert).
template <typename F>
void for_each_attr(const nlattr* first, const void* end, F&& each) {
  for (const nlattr* n = first; mnl_attr_ok(
           n, static_cast<int>(static_cast<const char*>(end) - reinterpret_cast<const char*>(n)));
       n = static_cast<const nlattr*>(mnl_attr_next(n)))
    each(n);
}

// The nested attributes of `a` (TCA_STATS2, TCA_OPTIONS), each passed to `each`.
template <typename F>
void for_each_nested(const nlattr* a, F&& each) {
  for_each_attr(static_cast<const nlattr*>(mnl_attr_get_payload(a)),
                static_cast<const char*>(mnl_attr_get_payload(a)) + mnl_attr_get_payload_len(a),
                each);
}

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
      default:
        break;
    }
  });
}

void read_tbf_options(const nlattr* a, QdiscStats& q) {
  uint64_t rate64 = 0;
  for_each_nested(a, [&](const nlattr* n) {
    if (mnl_attr_get_type(n) == TCA_TBF_PARMS) {
      const auto p = payload_as<tc_tbf_qopt>(n);
      q.tbf_rate = p.rate.rate;
      q.tbf_limit = p.limit;
    } else if (mnl_attr_get_type(n) == TCA_TBF_RATE64 &&
               mnl_attr_get_payload_len(n) >= sizeof(uint64_t)) {
      rate64 = payload_as<uint64_t>(n);
    }
  });
  if (rate64 > 0) q.tbf_rate = rate64;  // the 32-bit field holds ~0U then
}

}  // namespace

NlMsg qdisc_dump_request() {
  NlMsg m;
  m.bytes.resize(MNL_ALIGN(sizeof(nlmsghdr)) + MNL_ALIGN(sizeof(tcmsg)));
  nlmsghdr* h = mnl_nlmsg_put_header(m.bytes.data());
  h->nlmsg_type = RTM_GETQDISC;
  h->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  auto* t = static_cast<tcmsg*>(mnl_nlmsg_put_extra_header(h, sizeof(tcmsg)));
  t->tcm_family = AF_UNSPEC;
  m.bytes.resize(h->nlmsg_len);
  return m;
}

bool parse_qdisc_stats(const nlmsghdr* nlh, QdiscStats& q) {
  q = QdiscStats{};
  if (nlh->nlmsg_type != RTM_NEWQDISC || nlh->nlmsg_len < NLMSG_LENGTH(sizeof(tcmsg))) return false;
  const auto* t = static_cast<const tcmsg*>(mnl_nlmsg_get_payload(nlh));
  q.ifindex = t->tcm_ifindex;
  q.handle = t->tcm_handle;
  q.parent = t->tcm_parent;
  const nlattr* options = nullptr;
  const auto* first = static_cast<const nlattr*>(mnl_nlmsg_get_payload_offset(nlh, sizeof(tcmsg)));
  for_each_attr(first, mnl_nlmsg_get_payload_tail(nlh), [&](const nlattr* a) {
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
