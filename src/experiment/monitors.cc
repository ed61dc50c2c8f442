#include "experiment/monitors.h"

#include <poll.h>

namespace tb::experiment {

Status RouteMonitors::start(const std::vector<std::string>& netns_list) {
  for (const auto& ns : netns_list) {
    auto m = netlink::RouteMonitor::open(ns);
    if (!m) return std::unexpected(m.error());
    mons_.push_back(std::move(*m));
  }
  thread_ = std::thread([this] { loop(); });
  return {};
}

std::vector<std::pair<std::string, netlink::RouteChange>> RouteMonitors::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  return changes_;
}

void RouteMonitors::loop() {
  std::vector<pollfd> pfds;
  for (auto& m : mons_) pfds.push_back({m.fd(), POLLIN, 0});
  while (!stop_) {
    if (::poll(pfds.data(), pfds.size(), 20) <= 0) continue;
    for (size_t i = 0; i < mons_.size(); ++i)
      if (pfds[i].revents & POLLIN)
        for (auto& c : mons_[i].drain()) changes_.emplace_back(mons_[i].netns(), c);
  }
}

}  // namespace tb::experiment
