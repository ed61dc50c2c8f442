// One lab over several hosts (issue 19), on emulated hosts (emulated_hosts.h): the harness.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "e2e_util.h"
#include "emulated_hosts.h"

namespace tb::e2e {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

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

}  // namespace
}  // namespace tb::e2e
