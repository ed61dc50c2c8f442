// The lab VM's scenarios (images/labvm/*.toml) planned for the guest's kind of host (netem and
// Soft-RoCE): what images/labvm/check.sh relies on is in the plan, so a scenario that stopped
// loading or changed shape fails here, on any host, before a VM is booted.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "plan/plan.h"
#include "plan_ops.h"
#include "scenario/loader.h"
#include "shaping/backend.h"
#include "shaping/qdisc_plan.h"
#include "shaping/sizing.h"

namespace tb::plan {
namespace {

Plan plan_vm(const std::string& file) {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/images/labvm/" + file);
  EXPECT_TRUE(s) << s.error().message;
  if (!s) return {};
  HostCaps guest{.netem = true,
                 .tbf = true,
                 .htb = true,
                 .nfqueue = true,
                 .rxe = true,
                 .how = "lab VM",
                 .probed = true,
                 .rxe_detail = "lab VM has rxe",
                 .rxe_checked = true};
  auto p = compile(*s, guest, PlanOptions{});
  EXPECT_TRUE(p) << p.error().message;
  return p ? *p : Plan{};
}

TEST(LabVmScenarios, NetemRailCarriesTwentyMsOnNetem) {
  const Plan p = plan_vm("netem.toml");
  EXPECT_EQ(p.shaping, "netem");
  bool found = false;
  for (const auto& s : ops_of<SetShape>(p))
    if (s.netns == "tb-vmnetem-dc-s0-g0" && s.ifname == "rail") {
      found = true;
      EXPECT_EQ(s.shape.delay.ns, 20'000'000);  // check.sh's link reset / fault revert target
    }
  EXPECT_TRUE(found);
}

TEST(LabVmScenarios, DualTorGivesEveryGpuPortItsOwnRxeDevice) {
  const Plan p = plan_vm("dualtor.toml");
  EXPECT_EQ(p.rdma, "rxe");
  std::map<std::string, std::set<std::string>> ports;  // GPU -> interfaces with a device
  for (const auto& r : ops_of<CreateRxe>(p)) {
    ports[r.node].insert(r.ifname);
    EXPECT_EQ(r.name, r.netns + "-" + r.ifname);  // check.sh looks for these names
  }
  ASSERT_EQ(ports.size(), 4u);
  for (const auto& [gpu, ifs] : ports)
    EXPECT_EQ(ifs, (std::set<std::string>{"raila", "railb"})) << gpu;
  // One spine, so a ToR that lost a GPU's port reaches it through the other ToR.
  EXPECT_EQ(p.fabric().size(), 1u);
}

TEST(LabVmScenarios, BfdRunsFrrOnBothRoutersOverBothWanLinks) {
  const Plan p = plan_vm("bfd.toml");
  EXPECT_EQ(p.failover, "bfd");
  const auto routers = p.routers();
  ASSERT_EQ(routers.size(), 2u);
  for (const auto& r : routers) {
    EXPECT_EQ(r.bfd_interval_ms, 300);
    EXPECT_EQ(r.bfd_multiplier, 3);
    ASSERT_EQ(r.neighbors.size(), 2u) << r.node;
    std::map<std::string, int> pref;
    for (const auto& n : r.neighbors) pref[n.wan] = n.local_pref;
    EXPECT_GT(pref.at("pri"), pref.at("bak")) << r.node;  // check.sh expects pri before failover
  }
}

// check.sh's QoS block reads back these handles and rates on a/tr's `w`: netem at the root with
// the delay line (and only its ordering rate, far above the link's), HTB 80: under its class with
// the link's 4 Mbit/s, the classes' shares of it, and a u32 filter per DSCP value.
TEST(LabVmScenarios, QosClassesSitUnderNetemOnTheWanLink) {
  const Plan p = plan_vm("qos.toml");
  EXPECT_EQ(p.shaping, "netem");
  int found = 0;
  for (const auto& s : ops_of<SetShape>(p)) {
    if (s.ifname != "w") continue;
    ++found;
    EXPECT_EQ(s.backend, "netem");
    EXPECT_EQ(s.shape.qos.classes.size(), 3u);
    auto q = shaping::plan_qdiscs(s.shape, s.backend);
    ASSERT_TRUE(q) << q.error().message;
    ASSERT_GE(q->nodes.size(), 3u);
    EXPECT_EQ(q->nodes[0].handle, shaping::kNetemQosRoot);
    EXPECT_EQ(q->nodes[0].kind(), "netem");
    const auto& n = std::get<netlink::NetemOptions>(q->nodes[0].options);
    EXPECT_EQ(n.delay_ns, 20'000'000);
    EXPECT_EQ(n.rate, shaping::kOrderingRate);  // only to keep order; the link's rate is HTB's
    EXPECT_EQ(q->nodes[1].handle, shaping::kNetemQosHtb);
    EXPECT_EQ(q->nodes[1].parent, shaping::kNetemQosClass);
    EXPECT_EQ(std::get<netlink::HtbClassOptions>(q->nodes[2].options).rate, 500'000u);  // 4 Mbit
    EXPECT_EQ(q->filters.size(), 8u);  // 3 gold, 3 silver and 2 bronze DSCP values
  }
  EXPECT_EQ(found, 2);  // both ends
}

}  // namespace
}  // namespace tb::plan
