// The NFQUEUE rules made over nf_tables netlink (stage/netfilter_rules.h add_rules, in
// iptables-nft's encoding: netlink/nft_message.h) against the real kernel (root; skips
// otherwise, and where iptables is not iptables-nft, the only host where that path runs): the
// iptables tool prints them exactly as it prints the same rules made by iptables-restore, lists
// and removes them by marker; a second install over existing chains appends; a packet steered to
// a queue nobody serves is dropped (fail-closed); a refused batch names the namespace and the
// kernel's words and leaves nothing behind. Namespaces are tb-t<pid>-<tag>, removed by the
// fixture whatever happens; addresses 198.18.0.0/31; every command is bounded (-w 5, ping -W1).
#include <fmt/format.h>
#include <limits.h>
#include <stdlib.h>

#include <cstring>
#include <string>
#include <string_view>

#include "netns_fixture.h"
#include "plan/plan.h"
#include "stage/calibration.h"
#include "stage/netfilter_rules.h"

namespace tb::testing {
namespace {

class NetfilterNetlinkTest : public NetnsTest {
 protected:
  void SetUp() override {
    NetnsTest::SetUp();
    if (IsSkipped()) return;
    char real[PATH_MAX];
    if (::realpath("/usr/sbin/iptables", real) == nullptr ||
        !std::string_view(real).ends_with("/xtables-nft-multi"))
      GTEST_SKIP() << "iptables here is not iptables-nft: add_rules runs iptables-restore";
    a_ = ns("nfa");
    b_ = ns("nfb");
    mk_ = marker("nfnl");
    ASSERT_EQ(apply(veth_pair(a_, b_, mk_)), "") << "setup";
  }

  std::string rules_of(const std::string& netns) {
    return capture("ip netns exec " + netns + " iptables -w 5 -t mangle -S 2>&1");
  }
  // The same rules through the tool (the fallback path and the reference).
  int restore(const std::string& netns, const std::string& script) {
    const std::string file = "/tmp/tb-t" + std::to_string(getpid()) + "-nfnl.rules";
    {
      FILE* f = std::fopen(file.c_str(), "w");
      if (!f) return -1;
      std::fputs(script.c_str(), f);
      std::fclose(f);
    }
    const int rc = run_quiet(
        {"sh", "-c", "ip netns exec " + netns + " iptables-restore -w 5 --noflush < " + file});
    std::remove(file.c_str());
    return rc;
  }

  std::string a_, b_, mk_;
};

TEST_F(NetfilterNetlinkTest, IptablesPrintsThemAsTheRulesIptablesRestoreMade) {
  const std::string link = mk_ + "link=a-b";
  const std::vector<stage::MarkedQueue> queue{{{"e0", 17}, link + " queue"},
                                              {{"e0", 18, true}, link + " queue"}};
  const stage::ProbeRule probe{stage::kProbeQueue, stage::kProbeMark, stage::kProbeMarker};
  const std::string script = stage::queue_restore_script(queue, &probe);
  // Twice: the second time table and chains exist already (a NEWCHAIN without NLM_F_EXCL is an
  // update) and the rules are appended again, as iptables-restore --noflush appends them.
  for (int round = 1; round <= 2; ++round) {
    ASSERT_TRUE(stage::add_rules(stage::NetnsRules{a_, queue, {}, true})) << "round " << round;
    ASSERT_EQ(restore(b_, script), 0) << "round " << round;
    const std::string ours = rules_of(a_), theirs = rules_of(b_);
    EXPECT_EQ(ours, theirs) << "round " << round;
    EXPECT_NE(ours.find("-A PREROUTING -i e0 -m comment --comment \"" + link +
                        " queue\" -j NFQUEUE --queue-num 17"),
              std::string::npos)
        << ours;
  }
  // The tool's own listing and removal by marker find them.
  auto found = stage::list_marked_rules(a_, mk_);
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->size(), 4u);
  ASSERT_TRUE(stage::remove_marked_rules(a_, mk_));
  EXPECT_TRUE(stage::list_marked_rules(a_, mk_)->empty());
  ASSERT_TRUE(stage::remove_probe_rule(a_, probe.queue, probe.mark, probe.marker));
  ASSERT_TRUE(stage::remove_probe_rule(a_, probe.queue, probe.mark, probe.marker));
  EXPECT_EQ(rules_of(a_).find("-A "), std::string::npos) << rules_of(a_);
}

TEST_F(NetfilterNetlinkTest, APacketForAQueueNobodyServesIsDropped) {
  ASSERT_TRUE(ping(a_, "198.18.0.1"));
  ASSERT_TRUE(stage::add_queue_rule(b_, {"e0", 4242}, mk_ + "link=a-b queue"));
  // No --queue-bypass and no tb-delayd on queue 4242: the kernel drops what the rule steers.
  EXPECT_FALSE(ping(a_, "198.18.0.1"));
  EXPECT_FALSE(ping(a_, "198.18.0.1"));
  ASSERT_TRUE(stage::remove_marked_rules(b_, mk_));
  EXPECT_TRUE(ping(a_, "198.18.0.1"));
}

TEST_F(NetfilterNetlinkTest, ARefusedBatchNamesTheNamespaceAndLeavesNothing) {
  // A PREROUTING chain of another priority: our NEWCHAIN (priority -150) cannot update it.
  ASSERT_EQ(run_quiet({"ip", "netns", "exec", a_, "nft",
                       "add table ip mangle; add chain ip mangle PREROUTING { type filter hook "
                       "prerouting priority 0; policy accept; }"}),
            0);
  const std::vector<stage::MarkedQueue> queue{{{"e0", 18, true}, mk_ + "link=a-b queue"},
                                              {{"e0", 17}, mk_ + "link=a-b queue"}};
  auto r = stage::add_rules(std::vector<stage::NetnsRules>{{a_, queue, {}, false}}, 2);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("in netns " + a_), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("add chain ip mangle PREROUTING"), std::string::npos)
      << r.error().message;
  // The kernel's own answer (6.18: EOPNOTSUPP, a base chain's priority cannot change; older
  // kernels said EEXIST), as its errno text.
  ASSERT_NE(r.error().sys_errno, 0) << r.error().message;
  EXPECT_NE(
      r.error().message.find(std::string("PREROUTING: ") + std::strerror(r.error().sys_errno)),
      std::string::npos)
      << r.error().message;
  // All or nothing: the POSTROUTING rule before the refused chain is not there either.
  const std::string left = capture("ip netns exec " + a_ + " nft list table ip mangle 2>&1");
  EXPECT_EQ(left.find("queue"), std::string::npos) << left;
  EXPECT_EQ(left.find("POSTROUTING"), std::string::npos) << left;
}

}  // namespace
}  // namespace tb::testing
