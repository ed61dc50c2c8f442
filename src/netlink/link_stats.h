// Every interface's traffic counters of a namespace from one RTM_GETSTATS dump filtered to
// IFLA_STATS_LINK_64, read with libmnl into the caller's vector (capacity kept): what the
// congestion agent polls for its activity filter (docs/design-congestion.md §3.4). RTM_GETLINK
// would carry each link's whole description (IPv6 configuration and statistics included) and
// cost several times more per link; this carries 200 bytes of counters per link.
//
// Plain values; parse_link_stats is pure; dump_link_stats uses the caller's socket.
#pragma once

#include <linux/netlink.h>

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "netlink/message.h"
#include "netlink/socket.h"

namespace tb::netlink {

struct LinkStats {
  int ifindex = 0;
  uint64_t rx_bytes = 0, rx_packets = 0, rx_dropped = 0;
  uint64_t tx_bytes = 0, tx_packets = 0, tx_dropped = 0;
};

// RTM_GETSTATS with NLM_F_DUMP, IFLA_STATS_LINK_64 only: every link of the socket's namespace.
NlMsg link_stats_dump_request();
// One RTM_NEWSTATS message into `out` (reset first); false when it is not one, is too short or
// carries no IFLA_STATS_LINK_64.
bool parse_link_stats(const nlmsghdr* nlh, LinkStats& out);
// One dump into `out`: cleared first, its capacity kept. An interrupted dump fails with EAGAIN.
Status dump_link_stats(NlSocket& socket, std::vector<LinkStats>& out);

}  // namespace tb::netlink
