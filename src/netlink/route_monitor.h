// Watching a namespace's IPv4 routes change (RTNLGRP_IPV4_ROUTE), the way `ip monitor route`
// does: each RTM_NEWROUTE / RTM_DELROUTE of the main table, stamped on CLOCK_MONOTONIC when
// read. `run` uses it to time reroutes (a WAN failover, a dual-ToR next hop going away).
// One monitor per namespace; read from one thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"

namespace tb::netlink {

// A route added or deleted, or (is_link) an interface's carrier going down or up: IPv4 flushes
// the routes of an interface that loses carrier without a notification, so carrier is how a
// node sees a link failure at once.
struct RouteChange {
  int64_t t_ns = 0;  // CLOCK_MONOTONIC when read
  bool is_link = false;
  bool carrier = false;  // is_link: the new state
  std::string ifname;    // is_link
  bool added = false;
  std::string dst;   // "198.18.2.0/24", "default"
  int oif = 0;       // single-path output interface index, 0 when multipath
  int nexthops = 1;  // multipath: how many
  uint32_t priority = 0;
};

class RouteMonitor {
 public:
  // Subscribes inside /run/netns/<netns> (the socket stays bound to it).
  static Result<RouteMonitor> open(const std::string& netns);
  int fd() const { return fd_.get(); }
  const std::string& netns() const { return netns_; }
  // Everything that is waiting now, without blocking.
  std::vector<RouteChange> drain();

 private:
  RouteMonitor(UniqueFd fd, std::string netns) : fd_(std::move(fd)), netns_(std::move(netns)) {}
  UniqueFd fd_;
  std::string netns_;
  std::map<std::string, bool> carrier_;  // last carrier seen per interface
};

// Parses one datagram of route and link notifications (every link message is returned; the
// monitor keeps only carrier changes).
std::vector<RouteChange> parse_route_changes(const void* buf, size_t len, int64_t t_ns);

}  // namespace tb::netlink
