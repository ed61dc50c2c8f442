// plan/shaping.h add_shaping: which link directions get a qdisc, which a delay stage queue, and
// where the stage's rule sits (ingress, or egress when the receiving port is a bridge port).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "plan/plan.h"
#include "plan/shaping.h"
#include "scenario/loader.h"

namespace tb::shaping {
namespace {

plan::Plan hzbj() {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/hz-bj.toml");
  EXPECT_TRUE(s) << s.error().message;
  auto p = plan::compile(*s);
  EXPECT_TRUE(p) << p.error().message;
  return *p;
}

template <class T>
std::vector<T> ops_of(const plan::Plan& p) {
  std::vector<T> out;
  for (const auto& op : p.ops)
    if (auto* o = std::get_if<T>(&op)) out.push_back(*o);
  return out;
}

TEST(LabShaping, TbfLeavesDelayToStagesAtTheRightEnd) {
  auto p = hzbj();
  ASSERT_TRUE(add_shaping(p, "tbf"));
  EXPECT_EQ(p.shaping, "tbf");
  // WAN: received on each transit router's WAN port, 25 ms (Express Connect) / 30 ms (VPN).
  bool ec = false;
  for (const auto& st : p.stages())
    for (const auto& q : st.queues)
      if (q.link.find(":ec -> ") != std::string::npos) {
        ec = true;
        EXPECT_EQ(q.delay.ns, 25'000'000) << q.link;
        EXPECT_GE(q.maxlen, 1024u);
      }
  EXPECT_TRUE(ec);
  // Frontend server -> VPC: the VPC port is a bridge port, so the rule is the server's egress.
  bool egress = false;
  for (const auto& r : ops_of<plan::AddStageRule>(p)) {
    if (r.netns == "tb-hzbj-hz-s0" && r.ifname == "fe" && r.egress) egress = true;
    EXPECT_FALSE(r.netns == "tb-hzbj-hz-vpc" && r.ifname.starts_with("s")) << "bridge port";
    EXPECT_TRUE(r.marker.starts_with(plan::owner_marker("hzbj") + " ")) << r.marker;
  }
  EXPECT_TRUE(egress);
  // NVLink at 7.2 Gbit is rate-limited; nothing of it reaches a stage (100 ns not emulated).
  bool nvl = false;
  for (const auto& s : ops_of<plan::SetShape>(p))
    if (s.ifname == "nvl") {
      nvl = true;
      EXPECT_DOUBLE_EQ(s.shape.rate.bps, 7.2e9);
    }
  EXPECT_TRUE(nvl);
  // Delayed WAN: GPU namespaces get TCP buffers for the bandwidth-delay product.
  bool tcp = false;
  for (const auto& s : ops_of<plan::SetSysctl>(p))
    tcp = tcp || (s.netns == "tb-hzbj-hz-s0-g0" && s.key == "net/ipv4/tcp_rmem");
  EXPECT_TRUE(tcp);
}

TEST(LabShaping, NetemNeedsNoStage) {
  auto p = hzbj();
  ASSERT_TRUE(add_shaping(p, "netem"));
  EXPECT_TRUE(p.stages().empty());
  EXPECT_TRUE(ops_of<plan::AddStageRule>(p).empty());
  EXPECT_FALSE(ops_of<plan::SetShape>(p).empty());
}

TEST(LabShaping, NoneAddsNothingAndUnknownIsBadInput) {
  auto p = hzbj();
  const size_t n = p.ops.size();
  ASSERT_TRUE(add_shaping(p, "none"));
  EXPECT_EQ(p.ops.size(), n);
  auto r = add_shaping(p, "cake");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().exit_code, kExitBadInput);
  EXPECT_NE(r.error().message.find("netem"), std::string::npos);
}

TEST(LabShaping, GoldenTbfPlanForHzBj) {
  auto p = hzbj();
  ASSERT_TRUE(add_shaping(p, "tbf"));
  const std::string text = plan::to_text(p);
  const std::string path = std::string(TB_SOURCE_DIR) + "/tests/unit/golden/hz-bj-tbf.plan";
  if (const char* u = std::getenv("TB_UPDATE_GOLDENS"); u && std::string(u) == "1") {
    std::ofstream(path) << text;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(text, want.str());
}

}  // namespace
}  // namespace tb::shaping
