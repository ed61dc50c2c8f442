// scenario/names: node names, their hyphenated forms, namespace names and which nodes exist.
#include "scenario/names.h"

#include <gtest/gtest.h>

namespace tb::scenario {
namespace {

// hz: 2 servers x 4 GPUs on 2 rails, dual ToR, 2 spines. bj: 1 x 1, single ToR, no spines.
Scenario two_regions() {
  Scenario s;
  s.lab = "hzbj";
  Region hz;
  hz.name = "hz";
  hz.servers = 2;
  hz.gpus_per_server = 4;
  hz.rails = 2;
  hz.dual_tor = true;
  hz.spines = 2;
  Region bj;
  bj.name = "bj";
  bj.servers = 1;
  bj.gpus_per_server = 1;
  bj.spines = 0;
  s.regions = {hz, bj};
  return s;
}

TEST(Names, Builders) {
  EXPECT_EQ(gpu_node("hz", 0, 3), "hz/s0/g3");
  EXPECT_EQ(server_node("hz", 1), "hz/s1");
  EXPECT_EQ(tor_node("hz", 3, 0), "hz/tor3");
  EXPECT_EQ(tor_node("hz", 3, 1), "hz/tor3a");
  EXPECT_EQ(tor_node("hz", 3, 2), "hz/tor3b");
  EXPECT_EQ(spine_node("hz", 1), "hz/spine1");
  EXPECT_EQ(vpc_node("hz"), "hz/vpc");
  EXPECT_EQ(tr_node("hz"), "hz/tr");
}

TEST(Names, HostAndNetnsNames) {
  EXPECT_EQ(host_name("hz/s0/g3"), "hz-s0-g3");
  EXPECT_EQ(netns_name("hzbj", "hz/s0/g3"), "tb-hzbj-hz-s0-g3");
  EXPECT_EQ(netns_name("hzbj", "bj/tr"), "tb-hzbj-bj-tr");
  // The longest names the limits allow still fit a netns name comfortably.
  EXPECT_EQ(netns_name("abcdefgh", "abcdef/s1022/g63"), "tb-abcdefgh-abcdef-s1022-g63");
}

TEST(Names, CanonicalNode) {
  EXPECT_EQ(canonical_node("hz-s0-g3"), "hz/s0/g3");
  EXPECT_EQ(canonical_node("hz/s0/g3"), "hz/s0/g3");
  EXPECT_EQ(canonical_node("hz-tor0a"), "hz/tor0a");
  EXPECT_EQ(canonical_node(host_name("bj/spine1")), "bj/spine1");
}

TEST(Names, NodeExistsForEveryKind) {
  Scenario s = two_regions();
  // GPUs and servers.
  EXPECT_TRUE(node_exists(s, "hz/s0/g0"));
  EXPECT_TRUE(node_exists(s, "hz/s1/g3"));
  EXPECT_FALSE(node_exists(s, "hz/s1/g4"));
  EXPECT_FALSE(node_exists(s, "hz/s2/g0"));
  EXPECT_TRUE(node_exists(s, "hz/s1"));
  EXPECT_FALSE(node_exists(s, "hz/s2"));
  EXPECT_TRUE(node_exists(s, "bj/s0/g0"));
  // ToRs: dual in hz (a/b per rail, 2 rails), single in bj (1 rail = gpus_per_server).
  EXPECT_TRUE(node_exists(s, "hz/tor0a"));
  EXPECT_TRUE(node_exists(s, "hz/tor1b"));
  EXPECT_FALSE(node_exists(s, "hz/tor1"));
  EXPECT_FALSE(node_exists(s, "hz/tor2a"));
  EXPECT_FALSE(node_exists(s, "hz/tor0c"));
  EXPECT_TRUE(node_exists(s, "bj/tor0"));
  EXPECT_FALSE(node_exists(s, "bj/tor0a"));
  // Spines.
  EXPECT_TRUE(node_exists(s, "hz/spine1"));
  EXPECT_FALSE(node_exists(s, "hz/spine2"));
  EXPECT_FALSE(node_exists(s, "bj/spine0"));
  // VPC switch and transit router.
  EXPECT_TRUE(node_exists(s, "hz/vpc"));
  EXPECT_TRUE(node_exists(s, "bj/tr"));
  // Hyphenated forms are accepted.
  EXPECT_TRUE(node_exists(s, "hz-s1-g3"));
  EXPECT_TRUE(node_exists(s, "bj-tr"));
  // Nonsense.
  EXPECT_FALSE(node_exists(s, "sh/tr"));
  EXPECT_FALSE(node_exists(s, "hz"));
  EXPECT_FALSE(node_exists(s, ""));
  EXPECT_FALSE(node_exists(s, "hz/"));
  EXPECT_FALSE(node_exists(s, "hz/s"));
  EXPECT_FALSE(node_exists(s, "hz/s0/"));
  EXPECT_FALSE(node_exists(s, "hz/s0/g"));
  EXPECT_FALSE(node_exists(s, "hz/s-1"));
  EXPECT_FALSE(node_exists(s, "hz/s0/g0/x"));
  EXPECT_FALSE(node_exists(s, "hz/gateway"));
}

}  // namespace
}  // namespace tb::scenario
