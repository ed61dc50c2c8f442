#include "failover/agent.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/events.h"
#include "core/ipv4.h"
#include "netlink/message.h"
#include "netlink/socket.h"
#include "probe/socket.h"

namespace tb::failover {
namespace {

constexpr uint32_t kMagic = 0x74626661;  // "tbfa"

struct Probe {
  uint32_t magic;
  uint32_t path;
  uint64_t seq;
};

struct PathState {
  UniqueFd fd;
  uint64_t sent = 0;
  int64_t last_heard_ns = 0;  // the peer's last hello on this path
  int heard_since_down = 0;   // hellos heard while withdrawn
  bool installed = true;
};

Status set_routes(netlink::NlSocket& nl, const AgentPath& p, bool add) {
  const int ifindex = static_cast<int>(if_nametoindex(p.dev.c_str()));
  if (ifindex == 0) return sys_fail("agent: interface " + p.dev);
  auto gw = parse_ipv4(p.peer);
  if (!gw) return std::unexpected(gw.error());
  for (const auto& d : p.dsts) {
    auto dst = parse_prefix(d);
    if (!dst) return std::unexpected(dst.error());
    auto r = add ? nl.call(netlink::new_route({*dst,
                                               {{ifindex, *gw, false, 1}},
                                               std::nullopt,
                                               static_cast<uint32_t>(p.metric)}),
                           "agent: add route " + d + " via " + p.name)
                 : nl.call(netlink::del_route(*dst, static_cast<uint32_t>(p.metric)),
                           "agent: withdraw route " + d + " via " + p.name);
    // Already there / already gone (link set up or down in the meantime) is what we wanted.
    if (!r && r.error().sys_errno != EEXIST && r.error().sys_errno != ESRCH &&
        r.error().sys_errno != ENOENT)
      return r;
  }
  return {};
}

}  // namespace

nlohmann::json to_json(const AgentConfig& c) {
  nlohmann::json paths = nlohmann::json::array();
  for (const auto& p : c.paths)
    paths.push_back({{"name", p.name},
                     {"dev", p.dev},
                     {"peer", p.peer},
                     {"dsts", p.dsts},
                     {"metric", p.metric}});
  return {{"node", c.node},
          {"port", c.port},
          {"interval_ns", c.interval_ns},
          {"misses", c.misses},
          {"paths", paths}};
}

Result<AgentConfig> agent_config_from_json(const nlohmann::json& j) {
  try {
    AgentConfig c;
    c.node = j.at("node");
    c.port = j.at("port");
    c.interval_ns = j.at("interval_ns");
    c.misses = j.at("misses");
    for (const auto& p : j.at("paths"))
      c.paths.push_back({p.at("name"), p.at("dev"), p.at("peer"),
                         p.at("dsts").get<std::vector<std::string>>(), p.at("metric")});
    if (c.port == 0 || c.interval_ns < 1'000'000 || c.misses < 1 || c.paths.empty())
      return bad_input("agent config: port, interval >= 1 ms, misses >= 1 and a path are needed");
    return c;
  } catch (const nlohmann::json::exception& e) {
    return bad_input(std::string("agent config: ") + e.what());
  }
}

Status run_agent(const AgentConfig& c, const std::string& events_path,
                 const std::atomic<bool>& stop) {
  auto nl = netlink::NlSocket::open();
  if (!nl) return std::unexpected(nl.error());
  auto lst = probe::open_socket(SOCK_DGRAM, "");
  if (!lst) return std::unexpected(lst.error());
  TB_TRY(probe::set_dscp(lst->get(), probe::kControlDscp));  // answers go in the gold class
  auto any = probe::ipv4_endpoint("0.0.0.0", c.port);
  if (::bind(lst->get(), reinterpret_cast<const sockaddr*>(&*any), sizeof *any) != 0)
    return sys_fail("agent: bind UDP port " + std::to_string(c.port));
  std::vector<PathState> st(c.paths.size());
  for (size_t i = 0; i < c.paths.size(); ++i) {
    auto fd = probe::open_socket(SOCK_DGRAM, c.paths[i].dev);
    if (!fd) return std::unexpected(fd.error());
    TB_TRY(probe::set_dscp(fd->get(), probe::kControlDscp));
    auto to = probe::ipv4_endpoint(c.paths[i].peer, c.port);
    if (!to) return std::unexpected(to.error());
    if (::connect(fd->get(), reinterpret_cast<const sockaddr*>(&*to), sizeof *to) != 0)
      return sys_fail("agent: connect to " + c.paths[i].peer + " via " + c.paths[i].dev);
    st[i].fd = std::move(*fd);
  }
  auto event = [&](const char* what, const AgentPath& p, int misses) {
    (void)append_event(
        events_path,
        {{"event", what}, {"node", c.node}, {"path", p.name}, {"dev", p.dev}, {"misses", misses}});
  };
  // BFD's asynchronous mode: each side sends a hello on every path every interval and judges
  // a path by the hellos it hears from the peer on it, so the round-trip time does not matter.
  const int64_t detect_ns = c.interval_ns * c.misses;
  const int64_t started = probe::now_ns();
  for (auto& s : st) s.last_heard_ns = started + 1'000'000'000;  // the peer may start later
  int64_t next = started;
  while (!stop.load()) {
    const int64_t now = probe::now_ns();
    if (now >= next) {
      for (size_t i = 0; i < st.size(); ++i) {
        auto& s = st[i];
        const auto& p = c.paths[i];
        if (s.installed && now - s.last_heard_ns > detect_ns) {
          auto r = set_routes(*nl, p, false);
          s.installed = !r.has_value();
          s.heard_since_down = 0;
          event(r ? "agent_path_down" : "agent_error", p,
                static_cast<int>((now - s.last_heard_ns) / c.interval_ns));
        } else if (!s.installed && s.heard_since_down >= c.misses &&
                   now - s.last_heard_ns <= detect_ns) {
          auto r = set_routes(*nl, p, true);
          s.installed = r.has_value();
          event(r ? "agent_path_up" : "agent_error", p, 0);
        }
        Probe pr{kMagic, static_cast<uint32_t>(i), ++s.sent};
        (void)::send(s.fd.get(), &pr, sizeof pr, MSG_DONTWAIT);
      }
      next += c.interval_ns;
      if (next < now) next = now + c.interval_ns;  // after a stall: no burst
    }
    pollfd pfd{lst->get(), POLLIN, 0};
    const int wait_ms =
        static_cast<int>(std::max<int64_t>(0, (next - probe::now_ns()) / 1'000'000));
    if (::poll(&pfd, 1, std::min(wait_ms, 50)) <= 0) continue;
    for (;;) {  // the peer's hellos: which path is told by the address they came from
      Probe pr{};
      sockaddr_in from{};
      socklen_t fl = sizeof from;
      const ssize_t n = ::recvfrom(lst->get(), &pr, sizeof pr, MSG_DONTWAIT,
                                   reinterpret_cast<sockaddr*>(&from), &fl);
      if (n < 0) break;
      if (n != sizeof pr || pr.magic != kMagic) continue;
      char addr[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &from.sin_addr, addr, sizeof addr);
      for (size_t i = 0; i < st.size(); ++i)
        if (c.paths[i].peer == addr) {
          st[i].last_heard_ns = probe::now_ns();
          if (!st[i].installed) ++st[i].heard_since_down;
        }
    }
  }
  return {};
}

}  // namespace tb::failover
