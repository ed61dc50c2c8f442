// End to end, as root: a lab is sealed (issue #12). From one node of every class the plan has
// (GPU, server, ToR, spine, VPC switch, transit router) nothing outside 198.18.0.0/15 is
// reachable: the route to a TEST-NET address, a public one, each of this host's own addresses
// and its nameservers, followed hop by hop, ends at a node of the lab that has none; a real TCP
// connect and UDP datagram are refused as unreachable (by the node, or by that router's ICMP
// error) within a bound, not lost silently; and a name lookup fails at once. The host's own
// namespace gains no interface of the lab.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/unique_fd.h"
#include "e2e_util.h"
#include "netlink/netns.h"

namespace tb::e2e {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Per attempt: an ICMP error from a router inside the lab comes in milliseconds; the bound
// leaves room for its rate limit (one a second per source after a short burst).
constexpr int kWaitMs = 3000;

// One node of each class: two regions (so a WAN between transit routers), one with two rails
// and a spine, one with a single rail and no spine.
constexpr const char* kScenario = R"(
[lab]
name = "seal"

[[region]]
name = "a"
servers = 1
gpus_per_server = 2
rails = 2
scale_up = "nvlink"
rail = "hpn"
spines = 1
frontend = "vpc"

[[region]]
name = "b"
servers = 1
gpus_per_server = 1
rails = 1
scale_up = "nvlink"
rail = "hpn"
spines = 0
frontend = "vpc"

[[wan]]
name = "ec"
between = ["a", "b"]
profile = "express-connect"
role = "primary"
)";

struct Target {
  sockaddr_storage addr{};
  socklen_t len = 0;
  std::string what;  // "192.0.2.1 port 80 (TEST-NET-1)"
};

Target target(const std::string& ip, int port, const std::string& why) {
  Target t;
  t.what = ip + " port " + std::to_string(port) + " (" + why + ")";
  auto* v4 = reinterpret_cast<sockaddr_in*>(&t.addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&t.addr);
  if (::inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    t.len = sizeof(sockaddr_in);
  } else {
    EXPECT_EQ(::inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr), 1) << ip;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    t.len = sizeof(sockaddr_in6);
  }
  return t;
}

bool in_lab_space(const std::string& ip) {
  in_addr a{};
  if (::inet_pton(AF_INET, ip.c_str(), &a) != 1) return false;
  return (ntohl(a.s_addr) & 0xfffe0000u) == 0xc6120000u;  // 198.18.0.0/15
}

// This host's addresses as its own namespace has them (not loopback, not link-local, not the
// lab's range).
std::vector<std::string> host_addresses() {
  std::set<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (i->ifa_addr->sa_family == AF_INET) {
      auto* a = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
      if ((ntohl(a->sin_addr.s_addr) >> 24) == 127) continue;
      ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
      if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) || IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr)) continue;
      ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    } else {
      continue;
    }
    if (!in_lab_space(buf)) out.insert(buf);
  }
  ::freeifaddrs(list);
  return {out.begin(), out.end()};
}

std::vector<std::string> host_nameservers() {
  std::vector<std::string> out;
  std::ifstream in("/etc/resolv.conf");
  for (std::string word, ip; in >> word;)
    if (word == "nameserver" && in >> ip) out.push_back(ip);
  return out;
}

// The names of the interfaces in this (the host's) namespace.
std::set<std::string> host_links() {
  std::set<std::string> out;
  if (struct if_nameindex* names = ::if_nameindex()) {
    for (auto* n = names; n->if_index != 0; ++n) out.insert(n->if_name);
    ::if_freenameindex(names);
  }
  return out;
}

// What became of one attempt: "" when it failed as unreachable, else what happened.
// kTcp: a connect (a router's ICMP error aborts it in SYN_SENT). kUdp: a datagram (a DNS
// header) on a connected socket with IP_RECVERR, so the ICMP "network unreachable" a router
// inside the lab answers with (a soft error UDP otherwise ignores) ends it; resent every
// 250 ms, as a resolver would, since routers rate-limit those errors per source
// (ip_rt_error_cost: one a second after a burst of five).
enum class Proto { kTcp, kUdp };
std::string attempt(const Target& t, Proto proto) {
  const bool tcp = proto == Proto::kTcp;
  UniqueFd fd(::socket(t.addr.ss_family, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK, 0));
  if (!fd) return std::string("socket: ") + std::strerror(errno);
  const int on = 1;
  if (!tcp) {
    const bool v4 = t.addr.ss_family == AF_INET;
    ::setsockopt(fd.get(), v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_RECVERR : IPV6_RECVERR, &on,
                 sizeof on);
  }
  auto verdict = [&](int e, const char* step) -> std::string {
    if (e == ENETUNREACH || e == EHOSTUNREACH) return "";
    return std::string(step) + ": " + (e ? std::strerror(e) : "succeeded");
  };
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&t.addr), t.len) != 0 &&
      errno != EINPROGRESS)
    return verdict(errno, "connect");
  const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
  while (Clock::now() < deadline) {
    if (!tcp) {
      const char dns_header[] = "\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00";
      if (::send(fd.get(), dns_header, sizeof dns_header - 1, 0) < 0) return verdict(errno, "send");
    }
    pollfd p{fd.get(), static_cast<short>(tcp ? POLLOUT : POLLIN), 0};
    if (::poll(&p, 1, tcp ? kWaitMs : 250) == 0) continue;
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    return verdict(err, tcp ? "connect" : "answer");
  }
  return "no answer within " + std::to_string(kWaitMs) + " ms (where did it go?)";
}

std::map<std::string, json> one_node_per_kind(const json& st) {
  std::map<std::string, json> out;
  for (const auto& n : st["nodes"]) out.emplace(n["kind"].get<std::string>(), n);
  return out;
}

// The lab's wiring from `status --json`: each node's namespace, and across each link the node
// at the other end of (node, interface).
struct Wiring {
  std::map<std::string, std::string> netns;
  std::map<std::pair<std::string, std::string>, std::string> peer;
};

Wiring wiring(const json& st) {
  Wiring w;
  for (const auto& n : st["nodes"]) w.netns[n["name"]] = n["netns"];
  for (const auto& l : st["links"]) {
    w.peer[{l["a"]["node"], l["a"]["ifname"]}] = l["b"]["node"];
    w.peer[{l["b"]["node"], l["b"]["ifname"]}] = l["a"]["node"];
  }
  return w;
}

// Follows `addr` from `node` hop by hop (`ip route get` in each node's namespace; the next node
// is the one at the other end of the interface the route leaves by) until a node has no
// route. "" when it ends so inside the lab; else where it went. `path` gets the hops.
std::string trace(const Wiring& w, std::string node, const std::string& addr, std::string* path) {
  for (int hop = 0; hop < 16; ++hop) {
    *path += (hop ? " -> " : "") + node;
    auto r = sh("ip -n " + w.netns.at(node) + " -o route get " + addr);
    if (r.rc != 0)
      return r.out.find("unreachable") != std::string::npos ||
                     r.out.find("No route to host") != std::string::npos
                 ? ""
                 : "ip route get in " + node + ": " + r.out;
    const size_t at = r.out.find(" dev ");
    if (at == std::string::npos) return "no device in: " + r.out;
    std::istringstream words(r.out.substr(at + 5));
    std::string dev;
    words >> dev;
    auto next = w.peer.find({node, dev});
    if (next == w.peer.end()) return "leaves " + node + " by " + dev + ", which joins no lab node";
    node = next->second;
  }
  return "no end after 16 hops";
}

TEST(Seal, NoNodeOfAnyClassReachesOutsideTheLab) {
  TB_REQUIRE_ROOT();
  const auto t0 = Clock::now();
  const std::string lab = unique_lab("seal");
  const std::string path = "/tmp/tb-e2e-seal-" + std::to_string(::getpid()) + ".toml";
  std::ofstream(path) << kScenario;
  LabGuard guard(lab);
  const auto links_before = host_links();
  auto up = testbedctl("up " + path + " --name " + lab + " --shaping none");
  std::filesystem::remove(path);
  ASSERT_EQ(up.rc, 0) << up.out;

  json st = status_json(lab);
  ASSERT_FALSE(st.is_null());
  ASSERT_TRUE(st["live"].get<bool>()) << "status --json has no live view";
  const auto nodes = one_node_per_kind(st);
  for (const char* kind : {"gpu", "server", "tor", "spine", "vpc", "transit-router"})
    EXPECT_TRUE(nodes.contains(kind)) << "no " << kind << " node in " << st["nodes"].dump();
  const Wiring w = wiring(st);

  // Outside addresses: TEST-NET-1, a public resolver, this host's own addresses and its
  // nameservers (a loopback one would be the node's own loopback, where nothing listens).
  std::vector<std::string> outside = {"192.0.2.1", "8.8.8.8"};
  for (const auto& a : host_addresses()) outside.push_back(a);
  for (const auto& ns : host_nameservers())
    if (!ns.starts_with("127.") && ns != "::1") outside.push_back(ns);

  // Interfaces the lab has, by name: none of them may appear in the host's namespace.
  std::set<std::string> lab_ifnames;
  for (const auto& n : st["nodes"])
    for (const auto& i : n.value("interfaces", json::array())) lab_ifnames.insert(i["ifname"]);

  for (const auto& [kind, node] : nodes) {
    const std::string name = node["name"];
    // Every outside address: the route ends at a node of this lab that has none.
    for (const auto& addr : outside) {
      std::string hops;
      const std::string bad = trace(w, name, addr, &hops);
      EXPECT_EQ(bad, "") << kind << " " << name << " -> " << addr << ": " << hops;
    }
    // Real packets: a TCP connect and a UDP datagram to TEST-NET-1 are refused as unreachable,
    // by this node or by the router inside the lab where the route ends (ICMP; routers send
    // only a couple of those per source before rate-limiting, so one of each).
    auto fd = netlink::open_named_netns(node["netns"]);
    ASSERT_TRUE(fd) << fd.error().message;
    {
      auto in = netlink::ScopedNetns::enter(fd->get());
      ASSERT_TRUE(in) << in.error().message;
      for (Proto proto : {Proto::kTcp, Proto::kUdp}) {
        EXPECT_EQ(attempt(target("192.0.2.1", 53, "TEST-NET-1"), proto), "")
            << kind << " " << name << ": " << (proto == Proto::kTcp ? "TCP" : "UDP")
            << " to 192.0.2.1 was not refused as unreachable";
      }
    }
    // A name lookup inside the node asks only the lab's loopback resolver: it fails at once.
    const auto l0 = Clock::now();
    auto r = testbedctl("exec " + lab + " " + name +
                        " -- timeout 10 getent hosts tb-seal-check.example.com");
    const auto secs = std::chrono::duration<double>(Clock::now() - l0).count();
    EXPECT_EQ(r.rc, 2) << kind << ": getent found the name or failed otherwise: " << r.out;
    EXPECT_LT(secs, 5.0) << kind << ": the lookup took " << secs << " s";
  }

  for (const auto& ifname : host_links()) {
    if (!links_before.contains(ifname)) {
      EXPECT_FALSE(lab_ifnames.contains(ifname)) << "the host's namespace gained " << ifname;
    }
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 30.0);
}

}  // namespace
}  // namespace tb::e2e
