// netlink/dump.h against the real kernel (root; skips otherwise): links, qdiscs and addresses
// read back through libnl-route's caches on a libnl socket opened inside the namespace, and a
// multipath route lookup's answer parsed by libnl, each compared with what iproute2 made or says.
#include <gtest/gtest.h>
#include <linux/pkt_sched.h>

#include <algorithm>

#include "netlink/dump.h"
#include "netlink/netns.h"
#include "netns_fixture.h"

namespace tb::testing {
namespace {

class DumpTest : public NetnsTest {
 protected:
  static Result<netlink::NlSocket> socket_in(const std::string& netns) {
    auto fd = netlink::open_named_netns(netns);
    if (!fd) return std::unexpected(fd.error());
    return netlink::NlSocket::open_in(fd->get());
  }
};

TEST_F(DumpTest, LinksQdiscsAndAddressesOfTheSocketsNamespace) {
  const auto a = ns("da"), b = ns("db");
  const std::string mk = marker("dump");
  ASSERT_EQ(apply({
                plan::CreateNetns{a, "a", mk + "node=a"},
                plan::CreateNetns{b, "b", mk + "node=b"},
                plan::CreateVeth{{a, "e0", mk + "a-to-b", ""}, {b, "e0", mk + "b-to-a", ""}, 1400},
                plan::AddAddr{a, "e0", pfx("198.18.0.0/31")},
                plan::AddAddr{b, "e0", pfx("198.18.0.1/31")},
            }),
            "");
  ASSERT_EQ(
      run_quiet({"ip", "netns", "exec", a, "tc", "qdisc", "add", "dev", "e0", "root", "handle",
                 "1:", "tbf", "rate", "100mbit", "burst", "32kb", "latency", "50ms"}),
      0);
  ASSERT_TRUE(ping(a, "198.18.0.1"));

  // The socket is opened in `a` and used from this thread, which stays in its own namespace.
  auto sock = socket_in(a);
  ASSERT_TRUE(sock) << sock.error().message;
  auto links = netlink::list_links(*sock, a);
  ASSERT_TRUE(links) << links.error().message;
  ASSERT_EQ(links->size(), 2u);  // lo and e0: the host's interfaces are not here
  auto e0 = std::ranges::find_if(*links, [](const auto& l) { return l.name == "e0"; });
  ASSERT_NE(e0, links->end());
  EXPECT_EQ(e0->kind, "veth");
  EXPECT_EQ(e0->alias, mk + "a-to-b");
  EXPECT_EQ(e0->mtu, 1400);
  EXPECT_GT(e0->tx_bytes, 0u);
  EXPECT_GT(e0->rx_bytes, 0u);
  auto lo = std::ranges::find_if(*links, [](const auto& l) { return l.name == "lo"; });
  ASSERT_NE(lo, links->end());
  EXPECT_EQ(lo->kind, "loopback");
  EXPECT_EQ(lo->alias, mk + "node=a");

  auto q = netlink::list_qdiscs(*sock, a);
  ASSERT_TRUE(q) << q.error().message;
  auto tbf = std::ranges::find_if(*q, [&](const auto& r) { return r.ifindex == e0->ifindex; });
  ASSERT_NE(tbf, q->end());
  EXPECT_EQ(tbf->kind, "tbf");
  EXPECT_EQ(tbf->parent, TC_H_ROOT);
  EXPECT_EQ(tbf->handle, 0x10000u);
  EXPECT_GT(tbf->packets, 0u);
  EXPECT_GE(tbf->bytes, 98u);  // at least the echo request's frame (14 + 20 + 8 + 56 bytes)

  auto addrs = netlink::list_ipv4_addrs(*sock, a);
  ASSERT_TRUE(addrs) << addrs.error().message;
  ASSERT_EQ(addrs->size(), 2u);  // lo's 127.0.0.1/8 and e0's
  for (const auto& ad : *addrs)
    EXPECT_EQ(ad.addr.to_string(), ad.ifindex == e0->ifindex ? "198.18.0.0/31" : "127.0.0.1/8");

  auto one = netlink::query_link(*sock, e0->ifindex, a);
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one->name, "e0");
  auto none = netlink::query_link(*sock, 9999, a);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().sys_errno, ENODEV) << none.error().message;
}

TEST_F(DumpTest, MultipathRouteLookupListsEveryNextHop) {
  const auto h = ns("mh"), r = ns("mr");
  const std::string mk = marker("dmp");
  const Ipv4 hip = ip("198.18.2.1"), rip = ip("198.18.2.2");
  ASSERT_EQ(apply({
                plan::CreateNetns{h, "h", mk + "node=h"},
                plan::CreateNetns{r, "r", mk + "node=r"},
                plan::CreateVeth{{h, "e1", mk + "h1", ""}, {r, "f1", mk + "r1", ""}, 1500},
                plan::CreateVeth{{h, "e2", mk + "h2", ""}, {r, "f2", mk + "r2", ""}, 1500},
                plan::AddAddr{h, "e1", Prefix{hip, 32}},
                plan::AddAddr{h, "e2", Prefix{hip, 32}},
                plan::AddRoute{h, pfx("198.18.3.0/24"), {{"e1", rip, 1}, {"e2", rip, 1}}, hip, 0},
                plan::AddRoute{h, pfx("198.18.4.0/24"), {{"e2", rip, 1}}, std::nullopt, 0},
            }),
            "");
  auto sock = socket_in(h);
  ASSERT_TRUE(sock) << sock.error().message;
  auto links = netlink::list_links(*sock, h);
  ASSERT_TRUE(links) << links.error().message;
  auto index = [&](const std::string& n) {
    auto it = std::ranges::find_if(*links, [&](const auto& l) { return l.name == n; });
    return it == links->end() ? -1 : it->ifindex;
  };
  auto m = netlink::lookup_route(*sock, ip("198.18.3.7"), h);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->dst_len, 24);
  EXPECT_EQ(m->nexthops, 2);
  EXPECT_EQ(m->oif, 0);  // multipath
  ASSERT_EQ(m->hops.size(), 2u);
  EXPECT_EQ(m->hops[0].ifindex, index("e1"));
  EXPECT_EQ(m->hops[1].ifindex, index("e2"));
  for (const auto& hop : m->hops) EXPECT_EQ(hop.via, rip);
  EXPECT_EQ(m->prefsrc, hip);

  auto single = netlink::lookup_route(*sock, ip("198.18.4.9"), h);
  ASSERT_TRUE(single) << single.error().message;
  EXPECT_EQ(single->nexthops, 1);
  EXPECT_EQ(single->oif, index("e2"));
  ASSERT_EQ(single->hops.size(), 1u);
  EXPECT_EQ(single->hops[0].via, rip);

  auto unreachable = netlink::lookup_route(*sock, ip("198.18.9.9"), h);
  EXPECT_FALSE(unreachable);
}

}  // namespace
}  // namespace tb::testing
