// SetShape through NetlinkKernel against the real kernel (root; skips otherwise): a shape is
// applied to one end of a veth between two namespaces, read back with `tc` (observing only),
// changed in place, switched to another layout and undone. Every namespace is tb-t<pid>-<tag>
// and is removed in TearDown whatever happened; addresses are 198.18.0.0/15.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <thread>

#include "netns_fixture.h"
#include "shaping/backend.h"

namespace tb::testing {
namespace {

using plan::SetShape;

constexpr int64_t kMs = 1'000'000;

shaping::LinkShape rate(double bps, int64_t delay_ns = 0) {
  return shaping::LinkShape{Rate{bps}, Duration{delay_ns}, Duration{0}, 0, 1500};
}

class ShapingTest : public NetnsTest {
 protected:
  // a:e0 198.18.0.0/31 <-> b:e0 198.18.0.1/31.
  void make_pair(const std::string& tag) {
    a_ = ns(tag + "a");
    b_ = ns(tag + "b");
    const std::string mk = marker(tag);
    ASSERT_EQ(apply({
                  plan::CreateNetns{a_, "a", mk + "node=a"},
                  plan::CreateNetns{b_, "b", mk + "node=b"},
                  plan::CreateVeth{{a_, "e0", mk + "a-b", ""}, {b_, "e0", mk + "b-a", ""}, 1500},
                  plan::AddAddr{a_, "e0", *parse_prefix("198.18.0.0/31")},
                  plan::AddAddr{b_, "e0", *parse_prefix("198.18.0.1/31")},
              }),
              "");
  }
  std::string qdiscs() { return capture("tc -n " + a_ + " -s qdisc show dev e0 2>&1"); }
  std::string classes() { return capture("tc -n " + a_ + " class show dev e0 2>&1"); }
  // Bytes the root qdisc has sent ("Sent N bytes" of its first line).
  static long long sent_bytes(const std::string& tc) {
    std::smatch m;
    if (!std::regex_search(tc, m, std::regex(R"(Sent (\d+) bytes)"))) return -1;
    return std::stoll(m[1]);
  }

  std::string a_, b_;
};

TEST_F(ShapingTest, TbfAppliesWithoutRateTableChangesInPlaceAndUndoes) {
  make_pair("tbf");
  const SetShape slow{a_, "e0", rate(10e6), "tbf"};
  ASSERT_EQ(apply({slow}), "");
  std::string tc = qdiscs();
  EXPECT_NE(tc.find("qdisc tbf 1: root"), std::string::npos) << tc;
  EXPECT_NE(tc.find("rate 10Mbit"), std::string::npos) << tc;
  EXPECT_TRUE(ping(a_, "198.18.0.1"));
  EXPECT_TRUE(ping(a_, "198.18.0.1"));
  const long long before = sent_bytes(qdiscs());
  EXPECT_GT(before, 0);

  // Replace: the same qdisc object takes the new rate (its counters survive; a deleted and
  // re-added qdisc would start again from 0).
  ASSERT_EQ(apply({SetShape{a_, "e0", rate(50e6, 5 * kMs), "tbf"}}), "");
  tc = qdiscs();
  EXPECT_NE(tc.find("qdisc tbf 1: root"), std::string::npos) << tc;
  EXPECT_NE(tc.find("rate 50Mbit"), std::string::npos) << tc;
  EXPECT_EQ(tc.find("rate 10Mbit"), std::string::npos) << tc;
  EXPECT_GE(sent_bytes(tc), before) << tc;
  EXPECT_TRUE(ping(a_, "198.18.0.1"));

  ASSERT_TRUE(kernel_->undo(slow));
  tc = qdiscs();
  EXPECT_EQ(tc.find("tbf"), std::string::npos) << tc;
  EXPECT_NE(tc.find("noqueue"), std::string::npos) << tc;  // veth's default is back
  EXPECT_TRUE(kernel_->undo(slow));                        // nothing left to delete: success
  EXPECT_TRUE(ping(a_, "198.18.0.1"));
}

TEST_F(ShapingTest, HtbChangesInPlaceThenALayoutChangeGraftsANewTree) {
  make_pair("htb");
  ASSERT_EQ(apply({SetShape{a_, "e0", rate(20e6), "htb"}}), "");
  EXPECT_NE(qdiscs().find("qdisc htb 4: root"), std::string::npos) << qdiscs();
  EXPECT_NE(qdiscs().find("qdisc bfifo 40: parent 4:1"), std::string::npos) << qdiscs();
  EXPECT_NE(classes().find("class htb 4:1 root leaf 40: prio 0 rate 20Mbit ceil 20Mbit"),
            std::string::npos)
      << classes();
  EXPECT_TRUE(ping(a_, "198.18.0.1"));

  // htb's root cannot change in place; it is already there, so only the class changes.
  ASSERT_EQ(apply({SetShape{a_, "e0", rate(40e6), "htb"}}), "");
  EXPECT_NE(classes().find("rate 40Mbit ceil 40Mbit"), std::string::npos) << classes();
  EXPECT_NE(qdiscs().find("qdisc htb 4: root"), std::string::npos) << qdiscs();

  // Another layout: a new root is grafted over the old tree, which goes with its class.
  ASSERT_EQ(apply({SetShape{a_, "e0", rate(30e6), "tbf"}}), "");
  const std::string tc = qdiscs();
  EXPECT_NE(tc.find("qdisc tbf 1: root"), std::string::npos) << tc;
  EXPECT_EQ(tc.find("htb"), std::string::npos) << tc;
  EXPECT_EQ(tc.find("40:"), std::string::npos) << tc;
  EXPECT_EQ(classes().find("htb"), std::string::npos) << classes();
  EXPECT_TRUE(ping(a_, "198.18.0.1"));

  // Nothing to shape: the default qdisc comes back.
  ASSERT_EQ(apply({SetShape{a_, "e0", rate(0), "tbf"}}), "");
  EXPECT_NE(qdiscs().find("noqueue"), std::string::npos) << qdiscs();
  ASSERT_EQ(apply({SetShape{a_, "e0", rate(0), "tbf"}}), "");  // and again: still fine
}

TEST_F(ShapingTest, NetemBackendAppliesWhereTheKernelHasNetemAndSaysSoWhereNot) {
  make_pair("nem");
  shaping::LinkShape s{Rate{100e6}, Duration{2 * kMs}, Duration{500'000}, 0.5, 1500};
  // Whether this kernel has netem is asked of iproute2 (an oracle apart from the code under
  // test): a netem qdisc that `tc` can add and delete on b's end.
  const bool kernel_has_netem =
      std::system(("tc -n " + b_ +
                   " qdisc add dev e0 root netem delay 1ms >/dev/null 2>&1 && tc -n " + b_ +
                   " qdisc del dev e0 root >/dev/null 2>&1")
                      .c_str()) == 0;
  const std::string err = apply({SetShape{a_, "e0", s, "netem"}});
  EXPECT_EQ(err.empty(), kernel_has_netem) << err;
  if (kernel_has_netem) {
    const std::string tc = qdiscs();
    EXPECT_NE(tc.find("qdisc netem 2: root"), std::string::npos) << tc;
    EXPECT_NE(tc.find("qdisc tbf 20: parent 2:1"), std::string::npos) << tc;
    EXPECT_NE(tc.find("delay 2ms"), std::string::npos) << tc;
    // A delay change keeps the layout and changes netem in place.
    s.delay = Duration{4 * kMs};
    ASSERT_EQ(apply({SetShape{a_, "e0", s, "netem"}}), "");
    EXPECT_NE(qdiscs().find("delay 4ms"), std::string::npos) << qdiscs();
  } else {
    std::printf("netem backend on this kernel: %s\n", err.c_str());
    // This kernel has no sch_netem: the error names the op and the missing kind.
    EXPECT_NE(err.find("shape e0 in netns " + a_), std::string::npos) << err;
    EXPECT_NE(err.find("qdisc netem 2: root"), std::string::npos) << err;
    EXPECT_EQ(qdiscs().find("netem"), std::string::npos) << qdiscs();
  }
  ASSERT_TRUE(kernel_->undo(SetShape{a_, "e0", s, "netem"}));
  EXPECT_EQ(qdiscs().find("netem"), std::string::npos) << qdiscs();
}

TEST_F(ShapingTest, BadShapesAndMissingInterfacesAreErrorsAndUndoOfGoneThingsSucceeds) {
  make_pair("err");
  shaping::LinkShape bad = rate(10e6);
  bad.loss_pct = 150;
  std::string err = apply({SetShape{a_, "e0", bad, "tbf"}});
  EXPECT_NE(err.find("loss 150%"), std::string::npos) << err;
  err = apply({SetShape{a_, "e0", rate(10e6), "cake"}});
  EXPECT_NE(err.find("unknown shaping backend"), std::string::npos) << err;
  err = apply({SetShape{a_, "nope", rate(10e6), "tbf"}});
  EXPECT_NE(err.find("no interface nope"), std::string::npos) << err;
  EXPECT_TRUE(kernel_->undo(SetShape{a_, "nope", rate(10e6), "tbf"}));
  EXPECT_TRUE(kernel_->undo(SetShape{ns("gone"), "e0", rate(10e6), "tbf"}));
}

// A bounded transfer through a 20 Mbit/s tbf: goodput within +-30% of the rate (figures belong
// in scripts; this only shows the shaping bites).
TEST_F(ShapingTest, GoodputFollowsTheTbfRate) {
  if (run_quiet({"iperf3", "--version"}) != 0) GTEST_SKIP() << "iperf3 not installed";
  make_pair("gp");
  ASSERT_EQ(apply({SetShape{a_, "e0", rate(20e6), "tbf"}}), "");
  pid_t server = fork();
  if (server == 0) {
    if (FILE* null = std::fopen("/dev/null", "w")) {
      dup2(fileno(null), 1);
      dup2(fileno(null), 2);
    }
    execlp("timeout", "timeout", "20", "ip", "netns", "exec", b_.c_str(), "iperf3", "-s", "-1",
           "-B", "198.18.0.1", "-p", "5301", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(server, 0);
  std::string out;
  for (int attempt = 0; attempt < 20; ++attempt) {  // until the server listens
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    out =
        capture("timeout 15 ip netns exec " + a_ + " iperf3 -c 198.18.0.1 -p 5301 -t 3 -f m 2>&1");
    if (out.find("receiver") != std::string::npos) break;
  }
  kill(server, SIGTERM);
  waitpid(server, nullptr, 0);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(([\d.]+) Mbits/sec\s+receiver)"))) << out;
  const double mbit = std::stod(m[1]);
  // iperf3's 3 s receiver figure, another tool than ours: TBF holds 20 Mbit within 1-3%
  // (research/limits.md 3), but a 3 s TCP run includes its ramp and the burst; +-30% only
  // separates "shaped at 20 Mbit" from unshaped (Gbit) or mis-scaled (2 or 200 Mbit).
  EXPECT_GT(mbit, 20 * 0.7) << out;
  EXPECT_LT(mbit, 20 * 1.3) << out;
}

}  // namespace
}  // namespace tb::testing
