// Every qdisc of a namespace with its counters, from one RTM_GETQDISC dump read straight from the
// messages with libmnl: no libnl object per qdisc, and the records land in the caller's vector,
// whose capacity is kept (the request is one small buffer per dump), so a poll every millisecond
// stays cheap (the congestion agent's, docs/design-congestion.md
// §3.2; P0 measured a dump of a small switch at 7-11 us this way against 13-20 us through
// libnl-route's cache). dump.h's list_qdiscs stays the reader for everything that is not polled.
//
// Plain values; parse_qdisc_stats is pure; dump_qdisc_stats uses the caller's socket.
#pragma once

#include <linux/netlink.h>

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "netlink/message.h"
#include "netlink/socket.h"

namespace tb::netlink {

struct QdiscStats {
  int ifindex = 0;
  uint32_t handle = 0, parent = 0;  // parent TC_H_ROOT for a root qdisc
  char kind[16] = {};               // TCA_KIND ("tbf", "netem", "htb", "bfifo", ...)
  uint64_t bytes = 0, packets = 0;  // sent (TCA_STATS_BASIC)
  uint32_t drops = 0, overlimits = 0, requeues = 0;
  uint32_t backlog = 0, qlen = 0;  // bytes and packets queued now (TCA_STATS_QUEUE)
  // A TBF's options as the kernel keeps them (TCA_TBF_PARMS, TCA_TBF_RATE64); 0 for other kinds.
  uint64_t tbf_rate = 0;   // bytes per second
  uint32_t tbf_limit = 0;  // bytes its bfifo may hold
  // Its bucket in bytes, from the time to send it at the rate that the kernel keeps in 64 ns
  // ticks: up to one tick's worth (rate x 64 ns) below the bytes it was given.
  uint32_t tbf_burst = 0;
  // A RED qdisc's packets marked CE (TCA_STATS_APP's tc_red_xstats.marked); 0 for other kinds.
  uint32_t red_marked = 0;
};

// RTM_GETQDISC with NLM_F_DUMP: every qdisc of the socket's namespace.
NlMsg qdisc_dump_request();
// One RTM_NEWQDISC message into `out` (every field reset first); false when the message is not
// one or is too short to hold its tcmsg.
bool parse_qdisc_stats(const nlmsghdr* nlh, QdiscStats& out);
// One dump into `out`: cleared first, its capacity kept. An interrupted dump fails with EAGAIN
// (NlSocket::dump); the caller polls again.
Status dump_qdisc_stats(NlSocket& socket, std::vector<QdiscStats>& out);

}  // namespace tb::netlink
