// NetlinkKernel against the real kernel, with hand-written ops (root; skips otherwise). Every
// namespace is tb-t<pid>-<tag> and is removed in TearDown whatever happened.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include "netlink/netns.h"
#include "netns_fixture.h"

namespace tb::testing {
namespace {

using apply::IfaceInfo;
using plan::AddAddr;
using plan::AddRoute;
using plan::CreateBridge;
using plan::CreateNetns;
using plan::CreateVeth;
using plan::SetSysctl;
using plan::WriteHosts;

const IfaceInfo* find_if(const std::vector<IfaceInfo>& v, const std::string& name) {
  auto it = std::find_if(v.begin(), v.end(), [&](const auto& i) { return i.ifname == name; });
  return it == v.end() ? nullptr : &*it;
}

class NetlinkKernelTest : public NetnsTest {
 protected:
  Status undo_all(const std::vector<plan::Op>& ops) {
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) TB_TRY(kernel_->undo(*it));
    return {};
  }
};

TEST_F(NetlinkKernelTest, VethBetweenTwoNamespacesCarriesPing) {
  const auto a = ns("pa"), b = ns("pb");
  const std::string mk = marker("ping");
  ASSERT_EQ(apply({
                CreateNetns{a, "a", mk + "node=a"},
                CreateNetns{b, "b", mk + "node=b"},
                CreateVeth{{a, "e0", mk + "a-to-b", ""}, {b, "e0", mk + "b-to-a", ""}, 1400},
                AddAddr{a, "e0", pfx("198.18.0.0/31")},
                AddAddr{b, "e0", pfx("198.18.0.1/31")},
            }),
            "");
  EXPECT_TRUE(ping(a, "198.18.0.1"));
  EXPECT_TRUE(ping(b, "198.18.0.0"));

  auto ifs = kernel_->interfaces(a);
  ASSERT_TRUE(ifs) << ifs.error().message;
  const IfaceInfo* lo = find_if(*ifs, "lo");
  ASSERT_NE(lo, nullptr);
  EXPECT_EQ(lo->kind, "loopback");
  EXPECT_TRUE(lo->admin_up);
  EXPECT_EQ(lo->alias, mk + "node=a");
  const IfaceInfo* e0 = find_if(*ifs, "e0");
  ASSERT_NE(e0, nullptr);
  EXPECT_EQ(e0->kind, "veth");
  EXPECT_EQ(e0->alias, mk + "a-to-b");
  EXPECT_TRUE(e0->admin_up);
  EXPECT_TRUE(e0->oper_up);
  EXPECT_EQ(e0->mtu, 1400);
  ASSERT_EQ(e0->addrs.size(), 1u);
  EXPECT_EQ(e0->addrs[0].to_string(), "198.18.0.0/31");
  EXPECT_GT(e0->tx_bytes, 0u);  // the pings went out here
  // A fresh kernel object (as `testbedctl status` uses) sees the same.
  apply::NetlinkKernel other;
  auto again = other.interfaces(b);
  ASSERT_TRUE(again) << again.error().message;
  const IfaceInfo* be0 = find_if(*again, "e0");
  ASSERT_NE(be0, nullptr);
  EXPECT_EQ(be0->alias, mk + "b-to-a");
  EXPECT_EQ(be0->addrs.at(0).to_string(), "198.18.0.1/31");
}

TEST_F(NetlinkKernelTest, BridgeWithThreePortsSwitches) {
  const auto sw = ns("sw"), h1 = ns("h1"), h2 = ns("h2"), h3 = ns("h3");
  const std::string mk = marker("br");
  ASSERT_EQ(apply({
                CreateNetns{sw, "sw", mk + "node=sw"},
                CreateNetns{h1, "h1", mk + "node=h1"},
                CreateNetns{h2, "h2", mk + "node=h2"},
                CreateNetns{h3, "h3", mk + "node=h3"},
                CreateBridge{sw, "br0", mk + "bridge", 1500},
                // The bridge side as the first end (IFLA_MASTER on create) ...
                CreateVeth{{sw, "p1", mk + "p1", "br0"}, {h1, "e0", mk + "h1", ""}, 1500},
                // ... and as the peer (enslaved by a follow-up request).
                CreateVeth{{h2, "e0", mk + "h2", ""}, {sw, "p2", mk + "p2", "br0"}, 1500},
                CreateVeth{{h3, "e0", mk + "h3", ""}, {sw, "p3", mk + "p3", "br0"}, 1500},
                AddAddr{h1, "e0", pfx("198.18.1.1/24")},
                AddAddr{h2, "e0", pfx("198.18.1.2/24")},
                AddAddr{h3, "e0", pfx("198.18.1.3/24")},
            }),
            "");
  EXPECT_TRUE(ping(h1, "198.18.1.3"));
  EXPECT_TRUE(ping(h2, "198.18.1.1"));
  EXPECT_TRUE(ping(h3, "198.18.1.2"));
  const std::string links = capture("ip -n " + sw + " -o link show master br0");
  for (const char* p : {"p1", "p2", "p3"}) EXPECT_NE(links.find(p), std::string::npos) << links;
  auto ifs = kernel_->interfaces(sw);
  ASSERT_TRUE(ifs);
  const IfaceInfo* br = find_if(*ifs, "br0");
  ASSERT_NE(br, nullptr);
  EXPECT_EQ(br->kind, "bridge");
  EXPECT_EQ(br->alias, mk + "bridge");
}

TEST_F(NetlinkKernelTest, UnnumberedOnlinkMultipathRoutes) {
  // h ==(two /32-unnumbered links)== r -- d; h reaches d over an ECMP onlink route, r forwards.
  const auto h = ns("uh"), r = ns("ur"), d = ns("ud");
  const std::string mk = marker("mp");
  const Ipv4 hip = ip("198.18.2.1"), rip = ip("198.18.2.2");
  ASSERT_EQ(apply({
                CreateNetns{h, "h", mk + "node=h"},
                CreateNetns{r, "r", mk + "node=r"},
                CreateNetns{d, "d", mk + "node=d"},
                CreateVeth{{h, "e1", mk + "h1", ""}, {r, "f1", mk + "r1", ""}, 1500},
                CreateVeth{{h, "e2", mk + "h2", ""}, {r, "f2", mk + "r2", ""}, 1500},
                CreateVeth{{r, "g", mk + "rd", ""}, {d, "k", mk + "dr", ""}, 1500},
                AddAddr{h, "e1", Prefix{hip, 32}},
                AddAddr{h, "e2", Prefix{hip, 32}},
                AddAddr{r, "f1", Prefix{rip, 32}},
                AddAddr{r, "f2", Prefix{rip, 32}},
                AddAddr{r, "g", Prefix{rip, 32}},
                AddAddr{d, "k", pfx("198.18.3.1/32")},
                SetSysctl{r, "net/ipv4/ip_forward", "1"},
                AddRoute{h, pfx("198.18.3.0/24"), {{"e1", rip, 1}, {"e2", rip, 1}}, hip, 0},
                AddRoute{r, Prefix{hip, 32}, {{"f1", hip, 1}, {"f2", hip, 2}}, std::nullopt, 0},
                AddRoute{r, pfx("198.18.3.1/32"), {{"g", std::nullopt, 1}}, std::nullopt, 0},
                AddRoute{d, pfx("0.0.0.0/0"), {{"k", rip, 1}}, std::nullopt, 10},
            }),
            "");
  const std::string route = capture("ip -n " + h + " route show 198.18.3.0/24");
  EXPECT_NE(route.find("src 198.18.2.1"), std::string::npos) << route;
  EXPECT_NE(route.find("nexthop via 198.18.2.2 dev e1 weight 1 onlink"), std::string::npos)
      << route;
  EXPECT_NE(route.find("nexthop via 198.18.2.2 dev e2 weight 1 onlink"), std::string::npos)
      << route;
  const std::string back = capture("ip -n " + r + " route show 198.18.2.1");
  EXPECT_NE(back.find("dev f2 weight 2 onlink"), std::string::npos) << back;
  const std::string dflt = capture("ip -n " + d + " route show default");
  EXPECT_NE(dflt.find("via 198.18.2.2 dev k proto static metric 10 onlink"), std::string::npos)
      << dflt;
  auto fwd = netlink::open_named_netns(r);
  ASSERT_TRUE(fwd);
  EXPECT_EQ(netlink::read_sysctl(fwd->get(), "net/ipv4/ip_forward").value_or("?"), "1");
  EXPECT_TRUE(ping(h, "198.18.3.1"));
  EXPECT_TRUE(ping(d, "198.18.2.1"));
}

// An ecn region's VPC address (plan/congestion.h set_ecn_congctl): with noprefixroute the
// kernel makes no route for its subnet, so a cannot reach b until the plan's own route for it
// is in, which names the congestion control (`congctl cubic`), has scope link and the address
// as source.
TEST_F(NetlinkKernelTest, AddressWithoutPrefixRouteLeavesTheSubnetToThePlansRoute) {
  const auto a = ns("na"), b = ns("nb");
  const std::string mk = marker("npr");
  ASSERT_EQ(apply({
                CreateNetns{a, "a", mk + "node=a"},
                CreateNetns{b, "b", mk + "node=b"},
                CreateVeth{{a, "fe", mk + "a-to-b", ""}, {b, "fe", mk + "b-to-a", ""}, 1500},
                AddAddr{a, "fe", pfx("198.18.6.2/29"), true},
                AddAddr{b, "fe", pfx("198.18.6.3/29")},
            }),
            "");
  EXPECT_NE(capture("ip -n " + a + " -4 addr show dev fe").find("noprefixroute"),
            std::string::npos);
  EXPECT_EQ(capture("ip -n " + a + " route show 198.18.6.0/29"), "");
  EXPECT_NE(capture("ip -n " + b + " route show 198.18.6.0/29").find("proto kernel"),
            std::string::npos);
  EXPECT_FALSE(ping(a, "198.18.6.3"));
  ASSERT_EQ(apply({AddRoute{
                a, pfx("198.18.6.0/29"), {{"fe", std::nullopt, 1}}, ip("198.18.6.2"), 0, "cubic"}}),
            "");
  const std::string route = capture("ip -n " + a + " route show 198.18.6.0/29");
  EXPECT_NE(route.find("dev fe proto static scope link src 198.18.6.2 congctl cubic"),
            std::string::npos)
      << route;
  EXPECT_TRUE(ping(a, "198.18.6.3"));
  EXPECT_NE(capture("ip -n " + a + " route get 198.18.6.3").find("congctl cubic"),
            std::string::npos);
}

TEST_F(NetlinkKernelTest, DuplicateVethFailsWithKernelTextNamingTheOp) {
  const auto a = ns("da");
  const std::string mk = marker("dup");
  std::string err = apply({
      CreateNetns{a, "a", mk + "node=a"},
      CreateVeth{{a, "x", mk + "x", ""}, {a, "y", mk + "y", ""}, 1500},
      CreateVeth{{a, "x", mk + "x2", ""}, {a, "z", mk + "z", ""}, 1500},
      AddAddr{a, "y", pfx("198.18.4.1/24")},
  });
  EXPECT_EQ(err.rfind("create veth x <-> z in netns " + a + ": File exists", 0), 0u) << err;
  // Later requests still reach the kernel in order and the map recovers from the failure.
  auto ifs = kernel_->interfaces(a);
  ASSERT_TRUE(ifs);
  EXPECT_EQ(find_if(*ifs, "z"), nullptr);
  ASSERT_NE(find_if(*ifs, "y"), nullptr);
  EXPECT_EQ(find_if(*ifs, "y")->addrs.size(), 1u);
  // A synchronous error from an unknown interface names the op too.
  auto r = kernel_->submit(AddAddr{a, "nosuch", pfx("198.18.4.9/24")});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no interface nosuch in netns " + a), std::string::npos);
}

TEST_F(NetlinkKernelTest, PipelinePastTheOutstandingBoundMapsErrorsToTheirOp) {
  const auto a = ns("pl"), b = ns("pm");
  const std::string mk = marker("pipe");
  std::vector<plan::Op> ops = {CreateNetns{a, "a", mk + "node=a"},
                               CreateNetns{b, "b", mk + "node=b"}};
  for (int i = 0; i < 300; ++i) {
    std::string n = "v" + std::to_string(i);
    ops.push_back(CreateVeth{{a, n, mk + n, ""}, {b, n, mk + n, ""}, 1500});
  }
  ASSERT_EQ(apply(ops), "");
  // Twice the same address: the second fails, long after it was sent.
  std::vector<plan::Op> more;
  for (int i = 0; i < 300; ++i)
    more.push_back(AddAddr{a, "v" + std::to_string(i), Prefix{Ipv4{0xC6120000u + i * 4u}, 30}});
  more.push_back(AddAddr{a, "v7", Prefix{Ipv4{0xC6120000u + 7 * 4u}, 30}});
  for (int i = 0; i < 10; ++i)
    more.push_back(AddAddr{b, "v" + std::to_string(i), Prefix{Ipv4{0xC6120001u + i * 4u}, 30}});
  std::string err = apply(more);
  // 6.18 adds "(kernel: ipv4: Address already assigned)" from the extended ack.
  EXPECT_EQ(err.rfind("add address 198.18.0.28/30 to v7 in netns " + a + ": File exists", 0), 0u)
      << err;
  EXPECT_NE(err.find(" (kernel: "), std::string::npos) << err;  // the extended ack's text
  auto ifs = kernel_->interfaces(b);
  ASSERT_TRUE(ifs);
  EXPECT_EQ(ifs->size(), 301u);
  EXPECT_EQ(find_if(*ifs, "v9")->addrs.size(), 1u);
}

TEST_F(NetlinkKernelTest, UndoOfEverythingLeavesNothingAndIsIdempotent) {
  const auto a = ns("ua"), b = ns("ub");
  const std::string mk = marker("undo");
  std::vector<plan::Op> ops = {
      CreateNetns{a, "a", mk + "node=a"},
      CreateNetns{b, "b", mk + "node=b"},
      CreateBridge{a, "br0", mk + "br", 1500},
      CreateVeth{{a, "e0", mk + "e0", "br0"}, {b, "e0", mk + "e0", ""}, 1500},
      AddAddr{a, "br0", pfx("198.18.5.1/24")},
      AddAddr{b, "e0", pfx("198.18.5.2/24")},
      AddRoute{b, pfx("198.18.6.0/24"), {{"e0", ip("198.18.5.1"), 1}}, std::nullopt, 5},
      SetSysctl{a, "net/ipv4/ip_forward", "1"},
      WriteHosts{a, "# " + mk + "\n198.18.5.1 a\n"},
  };
  ASSERT_EQ(apply(ops), "");
  ASSERT_TRUE(ping(b, "198.18.5.1"));
  ASSERT_TRUE(std::filesystem::exists("/etc/netns/" + a + "/hosts"));
  // Undo the inner objects one by one first (what teardown does for foreign namespaces) ...
  for (size_t i = ops.size(); i-- > 2;) ASSERT_TRUE(kernel_->undo(ops[i])) << i;
  auto ifs = kernel_->interfaces(b);
  ASSERT_TRUE(ifs);
  EXPECT_EQ(ifs->size(), 1u);  // just lo
  EXPECT_EQ(capture("ip -n " + b + " route show 198.18.6.0/24"), "");
  EXPECT_FALSE(std::filesystem::exists("/etc/netns/" + a));
  // ... then everything again, namespaces included: "not found" is success.
  auto r = undo_all(ops);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(exists(a));
  EXPECT_FALSE(exists(b));
  auto again = undo_all(ops);
  EXPECT_TRUE(again) << again.error().message;
  auto left = netlink::list_named_netns();
  ASSERT_TRUE(left);
  for (const auto& n : *left) EXPECT_TRUE(n != a && n != b) << n;
}

TEST_F(NetlinkKernelTest, OwnedNetnsFindsOnlyOursByMarker) {
  const auto a1 = ns("oa1"), a2 = ns("oa2"), other = ns("ob"), bare = ns("oc"), bogus = ns("od");
  ASSERT_EQ(apply({
                CreateNetns{a1, "x", marker("own") + "node=x"},
                CreateNetns{a2, "y", marker("own") + "node=y"},
                CreateNetns{other, "z", marker("own2") + "node=z"},
            }),
            "");
  // A namespace without any alias (as `ip netns add` leaves it), and an entry in /run/netns that
  // is no namespace at all: neither may make the search fail.
  ASSERT_EQ(run_quiet({"ip", "netns", "add", bare}), 0);
  { std::ofstream(netlink::netns_path(bogus)); }
  auto owned = kernel_->owned_netns(marker("own"));
  ASSERT_TRUE(owned) << owned.error().message;
  EXPECT_EQ(*owned, (std::vector<std::string>{a1, a2}));
  // A name prefix narrows which namespaces are asked; the marker still decides.
  auto narrowed = kernel_->owned_netns(marker("own"), a1);
  ASSERT_TRUE(narrowed);
  EXPECT_EQ(*narrowed, (std::vector<std::string>{a1}));
  auto none = kernel_->owned_netns(marker("own2"), a1);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  apply::NetlinkKernel fresh;
  auto seen = fresh.owned_netns(marker("own2"));
  ASSERT_TRUE(seen);
  EXPECT_EQ(*seen, (std::vector<std::string>{other}));
  EXPECT_FALSE(fresh.owned_netns(""));  // an empty marker must never select everything
}

TEST_F(NetlinkKernelTest, WriteHostsAndUndoOnlyWithItsMarker) {
  const auto a = ns("wh");
  const std::string content = "# " + marker("hosts") + "\n198.18.7.1 a\n";
  ASSERT_TRUE(kernel_->submit(WriteHosts{a, content}));
  const std::string path = "/etc/netns/" + a + "/hosts";
  std::ifstream in(path);
  std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got, content);
  // Someone else's file (another first line) stays.
  ASSERT_TRUE(kernel_->undo(WriteHosts{a, "# testbedctl lab=other\n"}));
  EXPECT_TRUE(std::filesystem::exists(path));
  ASSERT_TRUE(kernel_->undo(WriteHosts{a, content}));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists("/etc/netns/" + a));
  EXPECT_TRUE(kernel_->undo(WriteHosts{a, content}));  // already gone: success
}

// A veth end brought up before its peer gets its carrier when the peer opens, but runs (its
// transmit queues started) only once the kernel's linkwatch work gets to it. set_links_up waits
// for each end's notification of being up with carrier: after it, the end opened first runs; an
// end whose peer stays down never reports, and the wait ends at its limit; an end up already is
// not waited for.
TEST_F(NetlinkKernelTest, SetLinksUpWaitsUntilBothEndsReportUp) {
  const auto a = ns("ra"), b = ns("rb");
  const std::string mk = marker("run");
  ASSERT_EQ(apply({
                CreateNetns{a, "a", mk + "node=a"},
                CreateNetns{b, "b", mk + "node=b"},
                CreateVeth{{a, "e0", mk + "a-to-b", ""}, {b, "e0", mk + "b-to-a", ""}, 1400},
            }),
            "");
  ASSERT_TRUE(kernel_->set_link_up(a, "e0", false));
  ASSERT_TRUE(kernel_->set_link_up(b, "e0", false));
  auto t0 = std::chrono::steady_clock::now();
  int64_t first_up = 0;
  auto alone = kernel_->set_links_up({{a, "e0"}}, 50, &first_up);
  ASSERT_TRUE(alone) << alone.error().message;
  EXPECT_EQ(*alone, -1) << "a reported carrier with its peer down";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  EXPECT_GT(first_up, 0);

  ASSERT_TRUE(kernel_->set_link_up(a, "e0", false));
  // The down's linkwatch work is not urgent (up to 1 s late): once it ran, the ends read not
  // running, and running after the wait means the wait saw linkwatch's up.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  for (const auto& n : {a, b}) {
    auto ifs = kernel_->interfaces(n);
    ASSERT_TRUE(ifs) << ifs.error().message;
    ASSERT_NE(find_if(*ifs, "e0"), nullptr);
    EXPECT_FALSE(find_if(*ifs, "e0")->running) << n;
  }
  // a first: it starts its queues when linkwatch reaches it, which sets its operational state
  // (running) first and then tells. b opens second and starts its queues as it opens; linkwatch
  // updates its operational state later.
  auto both = kernel_->set_links_up({{a, "e0"}, {b, "e0"}}, 2000, nullptr);
  ASSERT_TRUE(both) << both.error().message;
  EXPECT_GE(*both, 0);
  for (const auto& n : {a, b}) {
    auto ifs = kernel_->interfaces(n);
    ASSERT_TRUE(ifs) << ifs.error().message;
    const IfaceInfo* e0 = find_if(*ifs, "e0");
    ASSERT_NE(e0, nullptr);
    EXPECT_TRUE(e0->admin_up && e0->oper_up) << n;
    if (n == a) {
      EXPECT_TRUE(e0->running) << "set_links_up returned before linkwatch reached a";
    }
  }
  t0 = std::chrono::steady_clock::now();
  auto again = kernel_->set_links_up({{a, "e0"}, {b, "e0"}}, 2000, nullptr);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_GE(*again, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1000));
}

TEST_F(NetlinkKernelTest, CreatingAnExistingNamespaceFails) {
  const auto a = ns("ex");
  ASSERT_EQ(apply({CreateNetns{a, "a", marker("ex") + "node=a"}}), "");
  auto r = kernel_->submit(CreateNetns{a, "a", marker("ex") + "node=a"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "create netns " + a + ": File exists");
  EXPECT_TRUE(exists(a));
}

}  // namespace
}  // namespace tb::testing
