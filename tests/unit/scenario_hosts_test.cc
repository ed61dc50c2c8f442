// [[host]] and [vxlan] in a scenario (issue 19): read into the model, and every mistake exit 2
// with FILE:LINE:COL, the field and what is valid. The planner's half is multihost_test.cc.
#include <gtest/gtest.h>

#include "multihost_text.h"
#include "scenario/loader.h"
#include "scenario_text.h"

namespace tb::scenario {
namespace {

using testing_text::kBjWan;
using testing_text::kHead;
using testing_text::kTwoHosts;
using testing_text::load_error;

Scenario hosts_load_ok(const std::string& text) {
  auto s = load_text(text, "x.toml");
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  if (!s) return {};
  return std::move(*s);
}

TEST(MultihostScenario, ReadsHostsAndVxlan) {
  auto s = hosts_load_ok(std::string(kHead) + kBjWan + kTwoHosts +
                         "\n[vxlan]\nport = 8472\nvni_base = 5000\n");
  ASSERT_EQ(s.hosts.size(), 2u);
  EXPECT_EQ(s.hosts[0].name, "a");
  EXPECT_EQ(s.hosts[0].underlay.to_string(), "10.0.0.1");
  EXPECT_EQ(s.hosts[0].regions, std::vector<std::string>{"hz"});
  EXPECT_EQ(s.hosts[1].regions, std::vector<std::string>{"bj"});
  EXPECT_EQ(s.vxlan.port, 8472);
  EXPECT_EQ(s.vxlan.vni_base, 5000u);
  auto none = hosts_load_ok(std::string(kHead) + kBjWan);
  EXPECT_TRUE(none.hosts.empty());
  EXPECT_EQ(none.vxlan.port, 4789);
}

TEST(MultihostScenario, ServersAcceptBothSpellings) {
  auto s = hosts_load_ok(std::string(kHead) + kBjWan + kTwoHosts + "servers = [\"hz-s1\"]\n");
  ASSERT_EQ(s.hosts.size(), 2u);
  EXPECT_EQ(s.hosts[1].servers, std::vector<std::string>{"hz/s1"});
}

// Each mistake: exit 2, FILE:LINE:COL, the field, what is valid.
TEST(MultihostScenario, BadHostsNameTheLineAndWhatIsValid) {
  const std::string base = std::string(kHead) + kBjWan;
  EXPECT_HAS(load_error(base + kTwoHosts +
                        "[[host]]\nname = \"a\"\nunderlay = \"10.0.0.3\"\n"
                        "servers = [\"hz/s1\"]\n"),
             "x.toml:36:8: host \"a\": name: duplicate host \"a\" (first at line 27)");
  EXPECT_HAS(load_error(base + "[[host]]\nname = \"a\"\nunderlay = \"10.0.0.1\"\n"
                               "regions = [\"hz\", \"bjx\"]\n"),
             "x.toml:29:18: host \"a\": regions: no region named \"bjx\"; did you mean \"bj\"?");
  EXPECT_HAS(load_error(base + kTwoHosts +
                        "[[host]]\nname = \"c\"\nunderlay = \"10.0.0.3\"\n"
                        "regions = [\"bj\"]\n"),
             "x.toml:38:12: host \"c\": regions: region \"bj\" is already on host \"b\"");
  EXPECT_HAS(load_error(base + "[[host]]\nname = \"a\"\nunderlay = \"10.0.0.1\"\n"
                               "regions = [\"hz\"]\n"),
             "x.toml:11:1: region \"bj\": on no host; once [[host]] tables are declared, every "
             "region is placed on one of them");
  EXPECT_HAS(load_error(base + kTwoHosts + "servers = [\"hz/tor0\"]\n"),
             "host \"b\": servers: \"hz/tor0\" is not a server");
  EXPECT_HAS(load_error(base + kTwoHosts + "servers = [\"hz/s7\"]\n"),
             "host \"b\": servers: no node \"hz/s7\" in this lab");
  EXPECT_HAS(load_error(base + kTwoHosts + "servers = [\"hz/s1\", \"hz/s1\"]\n"),
             "server \"hz/s1\" is already on host \"b\"");
  EXPECT_HAS(load_error(base + "[[host]]\nname = \"a\"\nunderlay = \"10.0.0\"\nregions = [\"hz\", "
                               "\"bj\"]\n"),
             "x.toml:28:12: host \"a\": underlay: \"10.0.0\" is not an IPv4 address");
  EXPECT_HAS(load_error(base + "[[host]]\nname = \"a\"\nunderlay = \"198.18.0.9\"\nregions = "
                               "[\"hz\", \"bj\"]\n"),
             "underlay: \"198.18.0.9\" is inside the lab's address_space 198.18.0.0/15");
  EXPECT_HAS(load_error(base + "[[host]]\nname = \"a\"\nunderlay = \"10.0.0.1\"\nregions = "
                               "[\"hz\"]\n[[host]]\nname = \"b\"\nunderlay = \"10.0.0.1\"\n"
                               "regions = [\"bj\"]\n"),
             "x.toml:32:12: host \"b\": underlay: \"10.0.0.1\" is already host \"a\"'s");
  EXPECT_HAS(load_error(base + "[[host]]\nname = \"a\"\nunderlay = \"10.0.0.1\"\n"),
             "x.toml:26:1: host \"a\": regions: missing; a host holds at least one region");
  EXPECT_HAS(load_error(base + "[[host]]\nname = \"A_1\"\nunderlay = \"10.0.0.1\"\nregions = "
                               "[\"hz\", \"bj\"]\n"),
             "host \"A_1\": name:");
  EXPECT_HAS(load_error(base + "[[host]]\nname = \"a\"\nunderlay = \"10.0.0.1\"\nregions = "
                               "[\"hz\", \"bj\"]\nplace = 1\n"),
             "unknown key \"place\" in [[host]]");
  EXPECT_HAS(load_error(base + "[vxlan]\nport = 4789\n"),
             "x.toml:26:1: vxlan: only with [[host]] tables");
  EXPECT_HAS(load_error(base + kTwoHosts + "[vxlan]\nport = 70000\n"), "vxlan: port:");
}

}  // namespace
}  // namespace tb::scenario
