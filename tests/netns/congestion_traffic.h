// The congestion netns tests' traffic (congestion_levers_test.cc, P0; congestion_agent_test.cc,
// P4): the incast topology's links, TCP flows between the test's own namespaces pumped by two
// threads, and each namespace's TCP counters. Header-only; one Traffic per test.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"
#include "netlink/netns.h"
#include "netns_fixture.h"
#include "plan/op.h"

namespace tb::testing::congestion_traffic {

inline constexpr int64_t kMs = 1'000'000;

// The P0 topology's links, addresses and routes (namespaces made by the caller, `mk` its owner
// marker): s1:e0 198.18.1.0/31 and s2:e0 198.18.2.0/31 into the switch's p1/p2, the switch's out
// 198.18.3.0/31 to r:e0 198.18.3.1/31.
inline std::vector<plan::Op> incast_links(const std::string& s1, const std::string& s2,
                                          const std::string& sw, const std::string& r,
                                          const std::string& mk) {
  return {
      plan::CreateVeth{{s1, "e0", mk + "s1-sw", ""}, {sw, "p1", mk + "sw-s1", ""}, 1500},
      plan::CreateVeth{{s2, "e0", mk + "s2-sw", ""}, {sw, "p2", mk + "sw-s2", ""}, 1500},
      plan::CreateVeth{{sw, "out", mk + "sw-r", ""}, {r, "e0", mk + "r-sw", ""}, 1500},
      plan::AddAddr{s1, "e0", pfx("198.18.1.0/31")},
      plan::AddAddr{sw, "p1", pfx("198.18.1.1/31")},
      plan::AddAddr{s2, "e0", pfx("198.18.2.0/31")},
      plan::AddAddr{sw, "p2", pfx("198.18.2.1/31")},
      plan::AddAddr{sw, "out", pfx("198.18.3.0/31")},
      plan::AddAddr{r, "e0", pfx("198.18.3.1/31")},
      plan::AddRoute{s1, pfx("198.18.3.0/24"), {{"e0", ip("198.18.1.1"), 1}}, {}, 0},
      plan::AddRoute{s2, pfx("198.18.3.0/24"), {{"e0", ip("198.18.2.1"), 1}}, {}, 0},
      plan::AddRoute{r, pfx("198.18.1.0/24"), {{"e0", ip("198.18.3.0"), 1}}, {}, 0},
      plan::AddRoute{r, pfx("198.18.2.0/24"), {{"e0", ip("198.18.3.0"), 1}}, {}, 0},
  };
}

inline int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

// One counter of `group` ("Tcp", "TcpExt") in /proc/net/`file` of the namespace `netns_fd`; -1
// when it cannot be read.
inline int64_t proc_counter(int netns_fd, const char* file, const std::string& group,
                            const std::string& name) {
  auto in = netlink::ScopedNetns::enter(netns_fd);
  if (!in) return -1;
  std::ifstream f(std::string("/proc/thread-self/net/") + file);
  std::string head, values;
  while (std::getline(f, head) && std::getline(f, values)) {
    if (head.rfind(group + ":", 0) != 0) continue;
    std::istringstream h(head), v(values);
    std::string k, x;
    while (h >> k && v >> x)
      if (k == name) return std::stoll(x);
  }
  return -1;
}

// A namespace's TCP counters (/proc/net/snmp and netstat, read inside it).
struct TcpCounters {
  int64_t out_segs = 0, retrans = 0, host_queue = 0, probes = 0, timeouts = 0;
};
inline TcpCounters tcp_counters(int netns_fd) {
  return TcpCounters{proc_counter(netns_fd, "snmp", "Tcp", "OutSegs"),
                     proc_counter(netns_fd, "snmp", "Tcp", "RetransSegs"),
                     proc_counter(netns_fd, "netstat", "TcpExt", "TCPSpuriousRtxHostQueues"),
                     proc_counter(netns_fd, "netstat", "TcpExt", "TCPLossProbes"),
                     proc_counter(netns_fd, "netstat", "TcpExt", "TCPTimeouts")};
}
inline TcpCounters operator-(const TcpCounters& a, const TcpCounters& b) {
  return {a.out_segs - b.out_segs, a.retrans - b.retrans, a.host_queue - b.host_queue,
          a.probes - b.probes, a.timeouts - b.timeouts};
}

// TCP flows from sockets made in the senders' namespaces to a listener in r's, pumped by one
// sending and one receiving thread until `stop()` or their deadline.
class Traffic {
 public:
  ~Traffic() { stop(); }

  // `per` connections from each namespace in `from` to 198.18.3.1:port in `to`.
  Status connect(const std::vector<int>& from, int per, int to, uint16_t port) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    inet_pton(AF_INET, "198.18.3.1", &sa.sin_addr);
    UniqueFd listener;
    {
      auto in = netlink::ScopedNetns::enter(to);
      if (!in) return std::unexpected(in.error());
      listener = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      int one = 1;
      setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) < 0 ||
          ::listen(listener.get(), 64) < 0)
        return sys_fail("listen on 198.18.3.1:" + std::to_string(port));
    }
    for (size_t s = 0; s < from.size(); ++s) {
      for (int k = 0; k < per; ++k) {
        auto in = netlink::ScopedNetns::enter(from[s]);
        if (!in) return std::unexpected(in.error());
        UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        timeval tv{2, 0};  // bounds connect()
        setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) < 0)
          return sys_fail("connect to 198.18.3.1:" + std::to_string(port));
        fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
        tx_.push_back(std::move(fd));
        owner_.push_back(static_cast<int>(s));
      }
    }
    for (size_t i = 0; i < tx_.size(); ++i) {
      pollfd p{listener.get(), POLLIN, 0};
      if (::poll(&p, 1, 2000) != 1) return fail("accept: no connection within 2 s");
      UniqueFd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!fd) return sys_fail("accept");
      rx_.push_back(std::move(fd));
    }
    sent_ = std::vector<std::atomic<uint64_t>>(tx_.size());
    return {};
  }

  // Runs for at most `max_ms`.
  void start(int64_t max_ms) {
    const int64_t deadline = now_ns() + max_ms * kMs;
    sender_ = std::thread([this, deadline] {
      static const std::vector<char> chunk(64 * 1024, 'x');
      std::vector<pollfd> p;
      for (const auto& fd : tx_) p.push_back({fd.get(), POLLOUT, 0});
      while (!stop_ && now_ns() < deadline) {
        if (::poll(p.data(), p.size(), 20) <= 0) continue;
        for (size_t i = 0; i < p.size(); ++i) {
          if (!(p[i].revents & POLLOUT)) continue;
          ssize_t n = ::send(p[i].fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
          if (n > 0) sent_[i] += static_cast<uint64_t>(n);
        }
      }
    });
    receiver_ = std::thread([this, deadline] {
      std::vector<char> buf(256 * 1024);
      std::vector<pollfd> p;
      for (const auto& fd : rx_) p.push_back({fd.get(), POLLIN, 0});
      while (!stop_ && now_ns() < deadline + 500 * kMs) {
        if (::poll(p.data(), p.size(), 20) <= 0) continue;
        for (auto& x : p) {
          if (!(x.revents & (POLLIN | POLLHUP | POLLERR))) continue;
          ssize_t n = ::recv(x.fd, buf.data(), buf.size(), MSG_DONTWAIT);
          if (n > 0)
            received_ += static_cast<uint64_t>(n);
          else if (n == 0 || (errno != EAGAIN && errno != EINTR))
            x.fd = -1;  // closed: poll ignores it from now on
        }
      }
    });
  }

  void stop() {
    stop_ = true;
    if (sender_.joinable()) sender_.join();
    if (receiver_.joinable()) receiver_.join();
    // Reset, not FIN: nothing of these flows outlives the test in its namespaces.
    linger l{1, 0};
    for (auto* v : {&tx_, &rx_})
      for (auto& fd : *v) setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    tx_.clear();
    rx_.clear();
  }

  uint64_t sent(int sender) const {
    uint64_t n = 0;
    for (size_t i = 0; i < sent_.size(); ++i)
      if (owner_[i] == sender) n += sent_[i];
    return n;
  }
  uint64_t received() const { return received_; }
  int sockets() const { return static_cast<int>(tx_.size()); }

 private:
  std::vector<UniqueFd> tx_, rx_;
  std::vector<int> owner_;
  std::vector<std::atomic<uint64_t>> sent_;
  std::atomic<uint64_t> received_{0};
  std::atomic<bool> stop_{false};
  std::thread sender_, receiver_;
};

}  // namespace tb::testing::congestion_traffic
