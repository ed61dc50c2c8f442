#include "netlink/link_stats.h"

#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include <algorithm>
#include <cstring>

#include "netlink/attr.h"
#include "netlink/message_builder.h"

namespace tb::netlink {

NlMsg link_stats_dump_request() {
  MessageBuilder m(RTM_GETSTATS, NLM_F_REQUEST | NLM_F_DUMP);
  auto* h = m.put_extra<if_stats_msg>();
  h->family = AF_UNSPEC;
  h->filter_mask = IFLA_STATS_FILTER_BIT(IFLA_STATS_LINK_64);
  return m.finish();
}

bool parse_link_stats(const nlmsghdr* nlh, LinkStats& out) {
  out = LinkStats{};
  if (nlh->nlmsg_type != RTM_NEWSTATS || nlh->nlmsg_len < NLMSG_LENGTH(sizeof(if_stats_msg)))
    return false;
  const auto* h = static_cast<const if_stats_msg*>(mnl_nlmsg_get_payload(nlh));
  out.ifindex = static_cast<int>(h->ifindex);
  bool found = false;
  for_each_attr(nlh, sizeof(if_stats_msg), [&](const nlattr* a) {
    if (mnl_attr_get_type(a) != IFLA_STATS_LINK_64) return;
    rtnl_link_stats64 s{};
    std::memcpy(&s, mnl_attr_get_payload(a),
                std::min<size_t>(mnl_attr_get_payload_len(a), sizeof s));
    out.rx_bytes = s.rx_bytes;
    out.rx_packets = s.rx_packets;
    out.rx_dropped = s.rx_dropped;
    out.tx_bytes = s.tx_bytes;
    out.tx_packets = s.tx_packets;
    out.tx_dropped = s.tx_dropped;
    found = true;
  });
  return found;
}

Status dump_link_stats(NlSocket& socket, std::vector<LinkStats>& out) {
  out.clear();
  return socket.dump(link_stats_dump_request(), "dump link stats", [&](const nlmsghdr* nlh) {
    LinkStats s;
    if (parse_link_stats(nlh, s)) out.push_back(s);
  });
}

}  // namespace tb::netlink
