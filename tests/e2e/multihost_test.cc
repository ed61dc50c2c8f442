// One lab over several hosts (issue 19), on emulated hosts (emulated_hosts.h): the harness
// itself, and hz-bj split over two hosts, one region each, stitched by VXLAN over the underlay.
#include <gtest/gtest.h>

#include <thread>

#include <set>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "e2e_util.h"
#include "emulated_hosts.h"

namespace tb::e2e {
namespace {

// The harness: hosts reach each other over the underlay and nothing else; a namespace or a
// state file made in one host is seen in no other and not in the root namespace's view; the
// destructor leaves none of its namespaces.
TEST(EmulatedHosts, UnderlayJoinsThemAndEachSeesOnlyItsOwnState) {
  TB_REQUIRE_ROOT();
  std::string sw, ha, hb;
  {
    EmulatedHosts hosts("h", {"a", "b"});
    ASSERT_TRUE(hosts.ok()) << hosts.error();
    sw = hosts.switch_netns();
    ha = hosts.netns(0);
    hb = hosts.netns(1);
    CmdResult ping = hosts.run(0, "ping -c1 -W5 " + hosts.underlay(1));
    EXPECT_EQ(ping.rc, 0) << ping.out;
    // The host's own namespace: ul0 with its underlay address, no route to anything else.
    CmdResult addr = hosts.run(1, "ip -4 -o addr show dev ul0");
    EXPECT_TRUE(contains(addr.out, hosts.underlay(1) + "/24")) << addr.out;
    EXPECT_EQ(hosts.processes(0), std::vector<std::string>{});
    CmdResult route = hosts.run(0, "ip route get 192.0.2.1");
    EXPECT_NE(route.rc, 0) << route.out;
    // Each host is named after itself (its own UTS namespace); the root's name is untouched.
    EXPECT_EQ(hosts.run(0, "hostname").out, "a\n");
    EXPECT_EQ(hosts.run(1, "hostname").out, "b\n");
    EXPECT_NE(sh("hostname").out, "a\n");

    const std::string probe = ha + "-probe";
    CmdResult add = hosts.run(0, "ip netns add " + probe + " && ip netns list");
    ASSERT_EQ(add.rc, 0) << add.out;
    EXPECT_TRUE(contains(add.out, probe)) << add.out;
    CmdResult other = hosts.run(1, "ip netns list");
    EXPECT_FALSE(contains(other.out, probe)) << other.out;
    EXPECT_FALSE(std::filesystem::exists("/run/netns/" + probe));

    const std::string mark = "/run/testbedctl/" + ha + "-mark";
    ASSERT_EQ(hosts.run(0, "touch " + mark).rc, 0);
    EXPECT_EQ(hosts.run(0, "test -e " + mark).rc, 0);
    EXPECT_NE(hosts.run(1, "test -e " + mark).rc, 0);
    EXPECT_FALSE(std::filesystem::exists(mark));
    EXPECT_EQ(hosts.run(0, "ip netns del " + probe).rc, 0);
  }
  for (const auto& ns : {sw, ha, hb}) EXPECT_FALSE(std::filesystem::exists("/run/netns/" + ns));
}

// hz-bj with hz on host a and bj on host b: the two WAN links are VXLAN tunnels. Each host
// builds only its part; every GPU reaches every other by name (the hosts file's intended tier:
// across regions, the frontend and the WAN, through the tunnel); down on both leaves nothing.
class MultihostHzBj : public testing::Test {
 protected:
  void TearDown() override {
    if (!hosts_) return;
    for (size_t i = 0; i < hosts_->size(); ++i) hosts_->testbedctl(i, "down " + lab_);
    hosts_.reset();
    if (!file_.empty()) std::filesystem::remove(file_);
  }

  // hz-bj.toml with this test's lab name, a /16 address space, and the hosts: a holds hz, b
  // bj, and c (when there is one) hz's servers 2 and 3 with their GPUs.
  std::string write_scenario() {
    std::vector<std::array<std::string, 3>> placement = {
        {"a", hosts_->underlay(0), "regions = [\"hz\"]"},
        {"b", hosts_->underlay(1), "regions = [\"bj\"]"}};
    if (hosts_->size() > 2)
      placement.push_back({"c", hosts_->underlay(2), "servers = [\"hz/s2\", \"hz/s3\"]"});
    file_ = hzbj_over_hosts(lab_, "/tmp/" + lab_ + "-multihost.toml", placement);
    return file_;
  }

  // Host index of hz's server s: c (2) holds s2 and s3 when there are three hosts.
  size_t host_of_hz_server(int s) const { return hosts_->size() > 2 && s >= 2 ? 2 : 0; }

  // Every GPU pings every other by name, from the host that holds it.
  void ping_every_pair() {
    std::vector<std::pair<size_t, std::string>> gpus;  // (host, node name as a host name)
    for (int s = 0; s < 4; ++s)
      for (int g = 0; g < 4; ++g)
        gpus.emplace_back(host_of_hz_server(s),
                          "hz-s" + std::to_string(s) + "-g" + std::to_string(g));
    for (int s = 0; s < 2; ++s)
      for (int g = 0; g < 2; ++g)
        gpus.emplace_back(1, "bj-s" + std::to_string(s) + "-g" + std::to_string(g));
    int failures = 0;
    for (const auto& [host, src] : gpus) {
      std::string targets;
      for (const auto& [h, dst] : gpus)
        if (dst != src) targets += " " + dst;
      // Every target at once; a lost first packet (ARP, the delay stage starting) gets a second
      // try. Each ping is bounded by -W.
      const std::string loop = "for t in" + targets +
                               "; do (ping -c1 -W5 $t >/dev/null 2>&1 || ping -c1 -W5 $t "
                               ">/dev/null 2>&1 || echo FAIL $t) & done; wait";
      CmdResult r =
          hosts_->run(host, "ip netns exec tb-" + lab_ + "-" + src + " sh -c " + shell_quote(loop));
      if (contains(r.out, "FAIL") || r.rc != 0) {
        ++failures;
        ADD_FAILURE() << src << " on host " << hosts_->name(host) << ": " << r.out;
      }
    }
    EXPECT_EQ(failures, 0);
  }

  // down on each host removes its part and leaves nothing there.
  void down_every_host() {
    for (size_t i = 0; i < hosts_->size(); ++i) {
      CmdResult d = hosts_->testbedctl(i, "down " + lab_ + " --host " + hosts_->name(i));
      EXPECT_EQ(d.rc, 0) << d.out;
      CmdResult left =
          hosts_->run(i, "ip netns list; ls /run/testbedctl; ip -d link show type vxlan");
      EXPECT_EQ(left.out, "") << "left on host " << hosts_->name(i);
      EXPECT_EQ(hosts_->processes(i), std::vector<std::string>{})
          << "left running on host " << hosts_->name(i);
    }
  }

  std::unique_ptr<EmulatedHosts> hosts_;
  std::string lab_ = unique_lab("mh");
  std::string file_;
};

TEST_F(MultihostHzBj, EveryGpuReachesEveryOtherAcrossTheSeamAndDownLeavesNothing) {
  TB_REQUIRE_ROOT();
  hosts_ = std::make_unique<EmulatedHosts>("z", std::vector<std::string>{"a", "b"});
  ASSERT_TRUE(hosts_->ok()) << hosts_->error();
  const std::string file = write_scenario();

  // Both hosts plan the same digest; without --host, up refuses.
  CmdResult pa = hosts_->testbedctl(0, "plan " + file + " --host a --format json");
  CmdResult pb = hosts_->testbedctl(1, "plan " + file + " --host b --format json");
  ASSERT_EQ(pa.rc, 0) << pa.out;
  ASSERT_EQ(pb.rc, 0) << pb.out;
  auto ja = nlohmann::json::parse(pa.out, nullptr, false);
  auto jb = nlohmann::json::parse(pb.out, nullptr, false);
  ASSERT_FALSE(ja.is_discarded());
  ASSERT_FALSE(jb.is_discarded());
  EXPECT_EQ(ja["hosts"]["digest"], jb["hosts"]["digest"]);
  EXPECT_EQ(ja["hosts"]["cross_host"].size(), 2u);  // ec and vpn
  CmdResult bare = hosts_->testbedctl(0, "up " + file);
  EXPECT_EQ(bare.rc, 2) << bare.out;
  EXPECT_TRUE(contains(bare.out, "--host NAME")) << bare.out;

  // This machine is not host b (it has not b's underlay), and a peer with no route: exit 2,
  // nothing built.
  CmdResult not_b = hosts_->testbedctl(0, "up " + file + " --host b");
  EXPECT_EQ(not_b.rc, 2) << not_b.out;
  EXPECT_TRUE(contains(not_b.out, "this machine has no address " + hosts_->underlay(1)))
      << not_b.out;
  {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    const std::string far = file + ".far.toml";
    std::ofstream(far) << std::regex_replace(text.str(), std::regex(hosts_->underlay(1)),
                                             "203.0.113.9");
    CmdResult unreachable = hosts_->testbedctl(0, "up " + far + " --host a");
    std::filesystem::remove(far);
    EXPECT_EQ(unreachable.rc, 2) << unreachable.out;
    EXPECT_TRUE(contains(unreachable.out, "host b's underlay 203.0.113.9 is unreachable"))
        << unreachable.out;
  }
  EXPECT_EQ(hosts_->run(0, "ip netns list; ls /run/testbedctl").out, "");

  CmdResult ua = hosts_->testbedctl(0, "up " + file + " --host a");
  ASSERT_EQ(ua.rc, 0) << ua.out;
  CmdResult ub = hosts_->testbedctl(1, "up " + file + " --host b");
  ASSERT_EQ(ub.rc, 0) << ub.out;
  EXPECT_TRUE(contains(ua.out, "is up on host a: 32 of its 43 nodes")) << ua.out;
  EXPECT_TRUE(contains(ua.out, "host: a of 2")) << ua.out;

  // Each host holds only its region's namespaces; its tunnels' sockets stay on the underlay.
  CmdResult la = hosts_->run(0, "ip netns list");
  EXPECT_TRUE(contains(la.out, "tb-" + lab_ + "-hz-tr")) << la.out;
  EXPECT_FALSE(contains(la.out, "tb-" + lab_ + "-bj-")) << la.out;
  CmdResult tun = hosts_->run(0, "ip -n tb-" + lab_ + "-hz-tr -d link show ec");
  EXPECT_TRUE(contains(tun.out, "vxlan id")) << tun.out;
  EXPECT_TRUE(contains(tun.out, "remote " + hosts_->underlay(1))) << tun.out;
  EXPECT_TRUE(contains(tun.out, "link-netns") || contains(tun.out, "link-netnsid")) << tun.out;

  // status on host a: its part, the tunnels up to b, bj's links b's to show, nothing missing.
  CmdResult status = hosts_->testbedctl(0, "status " + lab_ + " --json");
  auto jst = nlohmann::json::parse(status.out, nullptr, false);
  ASSERT_TRUE(jst.is_object()) << status.out;
  EXPECT_EQ(jst["host"]["name"], "a");
  EXPECT_EQ(jst["host"]["digest"], ja["hosts"]["digest"]);
  int tunnels_up = 0, on_b = 0;
  for (const auto& l : jst["links"]) {
    const std::string state = l.value("state", "");
    EXPECT_NE(state, "missing") << l.dump();
    tunnels_up += state == "up (tunnel to b)";
    on_b += state == "on host b";
  }
  EXPECT_EQ(tunnels_up, 2);  // ec and vpn
  EXPECT_GT(on_b, 0);

  // exec reaches this host's nodes; a node of the other host is refused, naming where it is.
  CmdResult here = hosts_->testbedctl(0, "exec " + lab_ + " hz/s0/g0 -- true");
  EXPECT_EQ(here.rc, 0) << here.out;
  CmdResult there = hosts_->testbedctl(0, "exec " + lab_ + " bj/s0/g0 -- true");
  EXPECT_EQ(there.rc, 2) << there.out;
  EXPECT_TRUE(contains(there.out, "node bj/s0/g0 is on host b")) << there.out;

  ping_every_pair();
  // hz <-> bj crossed the seam inside the primary WAN link's tunnel: its device counted them.
  CmdResult stats = hosts_->run(0, "ip -n tb-" + lab_ + "-hz-tr -j -s link show ec");
  auto js = nlohmann::json::parse(stats.out, nullptr, false);
  ASSERT_TRUE(js.is_array() && !js.empty()) << stats.out;
  EXPECT_GE(js[0]["stats64"]["rx"]["packets"].get<int64_t>(), 16 * 4) << stats.out;
  EXPECT_GE(js[0]["stats64"]["tx"]["packets"].get<int64_t>(), 16 * 4) << stats.out;

  // down on each host removes its part, and --host is checked against what the host holds.
  CmdResult wrong = hosts_->testbedctl(0, "down " + lab_ + " --host b");
  EXPECT_EQ(wrong.rc, 2) << wrong.out;
  down_every_host();
}

// Three hosts: hz's servers 2 and 3 (with their GPUs) on host c, apart from their region's
// switches on a. Their frontend links (bridge ports of hz's VPC switch) and their GPUs' dual-ToR
// rail links are tunnels to a, the WAN links tunnels from a to b; a GPU on c reaches hz's other
// GPUs over the rail (through a's ToRs and spines) and bj's over the frontend and the WAN. A
// bench with a rank on each host is correct, and verify measures a rail tunnel between c and a
// (the coordinator holding one end) while b has nothing to do.
TEST_F(MultihostHzBj, HzServersSplitOverAThirdHostReachEveryGpu) {
  TB_REQUIRE_ROOT();
  hosts_ = std::make_unique<EmulatedHosts>("y", std::vector<std::string>{"a", "b", "c"});
  ASSERT_TRUE(hosts_->ok()) << hosts_->error();
  const std::string file = write_scenario();
  for (size_t i = 0; i < 3; ++i) {
    CmdResult u = hosts_->testbedctl(i, "up " + file + " --host " + hosts_->name(i));
    ASSERT_EQ(u.rc, 0) << u.out;
  }
  CmdResult lc = hosts_->run(2, "ip netns list");
  EXPECT_TRUE(contains(lc.out, "tb-" + lab_ + "-hz-s3-g3")) << lc.out;
  EXPECT_FALSE(contains(lc.out, "tb-" + lab_ + "-hz-s0")) << lc.out;
  // hz/s2's frontend tunnel is a port of the VPC switch's bridge on a.
  CmdResult port = hosts_->run(0, "ip -n tb-" + lab_ + "-hz-vpc -d link show s2");
  EXPECT_TRUE(contains(port.out, "vxlan id")) << port.out;
  EXPECT_TRUE(contains(port.out, "master br")) << port.out;
  ping_every_pair();

  // The same verb on all three hosts at once (as srun starts it): {a's, b's, c's result}.
  auto on_all = [&](const std::string& args) {
    std::vector<CmdResult> r(3);
    std::thread tb([&] { r[1] = hosts_->testbedctl(1, args); });
    std::thread tc([&] { r[2] = hosts_->testbedctl(2, args); });
    r[0] = hosts_->testbedctl(0, args);
    tb.join();
    tc.join();
    return r;
  };
  // A bench with a rank on each host: a coordinates, the values are right everywhere.
  auto bench = on_all("bench " + lab_ +
                      " allreduce -b 64K -e 64K -n 2 -w 1 -c 1 --ranks hz/s0/g0,hz/s3/g0,bj/s0/g0");
  ASSERT_EQ(bench[0].rc, 0) << bench[0].out << "\n--- b:\n"
                            << bench[1].out << "\n--- c:\n"
                            << bench[2].out;
  EXPECT_EQ(bench[1].rc, 0) << bench[1].out;
  EXPECT_EQ(bench[2].rc, 0) << bench[2].out;
  EXPECT_TRUE(contains(bench[0].out, "ranks on hosts a (1), c (1), b (1)")) << bench[0].out;
  EXPECT_TRUE(contains(bench[0].out, "Out of bounds values : 0 OK")) << bench[0].out;
  // verify of a server-ToR tunnel between c (hz/s3's GPU) and a (hz's ToR): a coordinates and
  // holds one end, c the other; they measure it between them across the seam; b holds neither
  // end and has nothing to do. Exit 2 (not judged on a stalled host) is no failure here.
  auto v = on_all("verify " + lab_ + " --quick --json --link hz/s3/g0 hz/tor0a");
  EXPECT_NE(v[0].rc, 1) << v[0].out << "\n--- c:\n" << v[2].out;
  EXPECT_EQ(v[2].rc, v[0].rc) << v[2].out;
  EXPECT_EQ(v[1].rc, 0) << v[1].out;
  EXPECT_TRUE(contains(v[1].out, "nothing to do here")) << v[1].out;
  auto j = nlohmann::json::parse(v[0].out.substr(std::min(v[0].out.find('{'), v[0].out.size())),
                                 nullptr, false);
  ASSERT_TRUE(j.is_object()) << v[0].out;
  ASSERT_EQ(j["classes"].size(), 1u) << v[0].out;
  const auto& c = j["classes"][0];
  EXPECT_NE(c["result"], "fail") << c.dump();
  const std::set<std::string> ends{c.value("measured_on", ""), c.value("served_on", "")};
  EXPECT_EQ(ends, (std::set<std::string>{"a", "c"})) << c.dump();
  EXPECT_TRUE(c["measurement"].contains("goodput")) << c.dump();
  down_every_host();
}

// The underlay's MTU (issue 35): a tunnel's packets are its link's MTU on the underlay (the
// tunnel's MTU + 50 bytes of VXLAN). hz's server 3 on host b puts its GPUs' rail links (hpn,
// MTU 4200) in tunnels between a and b; with a's underlay NIC at 1500 (an ordinary data-centre
// NIC) or one byte short (4199), `up --host a` refuses before building anything, naming the
// link, its profile's MTU and the device; so does b's. hz and bj alone cross only the WAN
// (Express Connect 1500, VPN 1400), which a 1500-byte underlay carries exactly: up passes.
TEST_F(MultihostHzBj, AnUnderlayNarrowerThanATunnelsPacketsIsRefusedAtUp) {
  TB_REQUIRE_ROOT();
  hosts_ = std::make_unique<EmulatedHosts>("m", std::vector<std::string>{"a", "b"});
  ASSERT_TRUE(hosts_->ok()) << hosts_->error();
  const std::string moved =
      hzbj_over_hosts(lab_, "/tmp/" + lab_ + "-mtu.toml",
                      {{{"a", hosts_->underlay(0), "regions = [\"hz\"]"},
                        {"b", hosts_->underlay(1), "regions = [\"bj\"]\nservers = [\"hz/s3\"]"}}});
  const std::regex rail_link(
      "link hz/s3/g[0-3] <-> hz/tor[0-3][ab] \\(profile \"rail\", mtu 4200\\) crosses to host b");
  for (const int mtu : {1500, 4199}) {
    ASSERT_EQ(hosts_->run(0, "ip link set ul0 mtu " + std::to_string(mtu)).rc, 0);
    CmdResult u = hosts_->testbedctl(0, "up " + moved + " --host a");
    EXPECT_EQ(u.rc, 2) << u.out;
    EXPECT_TRUE(std::regex_search(u.out, rail_link)) << u.out;
    EXPECT_TRUE(contains(u.out, "leaves through ul0 with MTU " + std::to_string(mtu))) << u.out;
    EXPECT_TRUE(contains(u.out, "raise the underlay's MTU to 4200")) << u.out;
    EXPECT_EQ(hosts_->run(0, "ip netns list; ls /run/testbedctl").out, "") << "built on a";
  }
  ASSERT_EQ(hosts_->run(1, "ip link set ul0 mtu 1500").rc, 0);
  CmdResult ub = hosts_->testbedctl(1, "up " + moved + " --host b");
  EXPECT_EQ(ub.rc, 2) << ub.out;
  EXPECT_TRUE(contains(ub.out, "crosses to host a")) << ub.out;
  EXPECT_EQ(hosts_->run(1, "ip netns list; ls /run/testbedctl").out, "") << "built on b";
  std::filesystem::remove(moved);

  // The WAN links alone: 1500-byte packets on a 1500-byte underlay.
  ASSERT_EQ(hosts_->run(0, "ip link set ul0 mtu 1500").rc, 0);
  const std::string file = write_scenario();
  CmdResult ua = hosts_->testbedctl(0, "up " + file + " --host a");
  EXPECT_EQ(ua.rc, 0) << ua.out;
  CmdResult d = hosts_->testbedctl(0, "down " + lab_ + " --host a");
  EXPECT_EQ(d.rc, 0) << d.out;
}

}  // namespace
}  // namespace tb::e2e
