// Route monitors for `run`: one netlink::RouteMonitor per watched namespace (the transit
// routers, the faulted links' ends, the probes' sources), read from one thread until stopped.
// start() and stop() are called from one thread; the reader thread is internal. The
// destructor stops it.
#pragma once

#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "netlink/route_monitor.h"

namespace tb::experiment {

class RouteMonitors {
 public:
  RouteMonitors() = default;
  RouteMonitors(const RouteMonitors&) = delete;
  RouteMonitors& operator=(const RouteMonitors&) = delete;
  ~RouteMonitors() { stop(); }

  Status start(const std::vector<std::string>& netns_list);
  // Joins the reader; every change seen, by namespace, in the order read.
  std::vector<std::pair<std::string, netlink::RouteChange>> stop();

 private:
  void loop();
  std::vector<netlink::RouteMonitor> mons_;
  std::vector<std::pair<std::string, netlink::RouteChange>> changes_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tb::experiment
