// Faults and live link changes on a link between hosts (issue 19), on emulated hosts
// (emulated_hosts.h): hz-bj with hz on host a and bj on host b, so the WAN links are VXLAN
// tunnels with one end on each. `link` and `fault` on one host act on that host's end and say
// what the other host must run; a link or node wholly on the other host is exit 2 naming it.
// Measured with ping from hz/s0/g0 (host a) to bj/s0/g0 (host b) over Express Connect (25 ms
// each way): the thresholds are tens of milliseconds apart, so a loaded host moves none.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

#include "e2e_util.h"
#include "emulated_hosts.h"

namespace tb::e2e {
namespace {

class MultihostFault : public testing::Test {
 protected:
  void TearDown() override {
    if (!hosts_) return;
    for (size_t i = 0; i < hosts_->size(); ++i) hosts_->testbedctl(i, "down " + lab_);
    hosts_.reset();  // deletes the hosts' namespaces
    if (!file_.empty()) std::filesystem::remove(file_);
  }

  // hz-bj.toml with this test's lab name, a /16 address space, hz on host a and bj on host b.
  std::string write_scenario() {
    file_ = hzbj_over_hosts(lab_, "/tmp/" + lab_ + "-multihost-fault.toml",
                            {{{"a", hosts_->underlay(0), "regions = [\"hz\"]"},
                              {"b", hosts_->underlay(1), "regions = [\"bj\"]"}}});
    return file_;
  }

  // `count` pings from hz/s0/g0 (host a) to bj/s0/g0, 0.1 s apart: the RTTs (ms) answered.
  // -U: user-space timestamps (a delay on the pinging side's ingress counts too).
  std::vector<double> ping(int count) {
    CmdResult r = hosts_->testbedctl(0, "exec " + lab_ + " hz/s0/g0 -- ping -U -n -c " +
                                            std::to_string(count) + " -i 0.1 -W 2 bj-s0-g0");
    std::vector<double> rtts;
    for (size_t at = r.out.find("time="); at != std::string::npos; at = r.out.find("time=", at + 5))
      rtts.push_back(std::stod(r.out.substr(at + 5)));
    return rtts;
  }
  // The median RTT of 15 pings; NaN (failing every comparison) when fewer than 8 came back.
  double median_ms() {
    auto rtts = ping(15);
    if (rtts.size() < 8) {
      ADD_FAILURE() << "hz/s0/g0 -> bj-s0-g0: " << rtts.size() << " of 15 answered";
      return std::numeric_limits<double>::quiet_NaN();
    }
    std::sort(rtts.begin(), rtts.end());
    return rtts[rtts.size() / 2];
  }
  CmdResult on(size_t host, const std::string& verb_args) {
    return hosts_->testbedctl(host, verb_args);
  }

  std::unique_ptr<EmulatedHosts> hosts_;
  std::string lab_ = unique_lab("mf");
  std::string file_;
};

TEST_F(MultihostFault, WanTunnelDownUpDelayAndLossFromEachHost) {
  TB_REQUIRE_ROOT();
  hosts_ = std::make_unique<EmulatedHosts>("f", std::vector<std::string>{"a", "b"});
  ASSERT_TRUE(hosts_->ok()) << hosts_->error();
  const std::string file = write_scenario();
  ASSERT_EQ(on(0, "up " + file + " --host a").rc, 0);
  ASSERT_EQ(on(1, "up " + file + " --host b").rc, 0);
  // hz and bj reach each other over Express Connect (BGP across the tunnels has converged).
  std::string last;
  ASSERT_TRUE(wait_converged(*hosts_, 0, lab_, "hz/s0/g0", "bj-s0-g0", 56, &last)) << last;
  const std::string ec = " hz/tr:ec bj/tr";

  // What host a does not hold: a link of bj's, bj's router, a GPU of bj's: exit 2 naming b.
  CmdResult far = on(0, "link " + lab_ + " down bj/s0/g0 bj/tor0");
  EXPECT_EQ(far.rc, 2) << far.out;
  EXPECT_TRUE(contains(far.out, "is on host b, not on this one (host a)")) << far.out;
  CmdResult crash = on(0, "fault " + lab_ + " crash bj/tr");
  EXPECT_EQ(crash.rc, 2) << crash.out;
  EXPECT_TRUE(contains(crash.out, "node bj/tr is on host b")) << crash.out;
  CmdResult kill = on(0, "fault " + lab_ + " kill bj/s0/g0");
  EXPECT_EQ(kill.rc, 2) << kill.out;
  EXPECT_TRUE(contains(kill.out, "run it on host b")) << kill.out;

  const double base = median_ms();
  ASSERT_GT(base, 45.0) << "not over Express Connect (25 ms each way)";

  // Down on host a's end of the tunnel: nothing crosses it either way. hz's routes move to the
  // VPN, bj's still lead into the tunnel, whose packets find no device on a: no reply.
  CmdResult down = on(0, "link " + lab_ + " down" + ec);
  ASSERT_EQ(down.rc, 0) << down.out;
  EXPECT_TRUE(contains(down.out, "on host a's end hz/tr:ec")) << down.out;
  EXPECT_TRUE(contains(down.out, "the far end bj/tr:ec is on host b")) << down.out;
  EXPECT_TRUE(contains(down.out, "on the other host: sudo testbedctl link " + lab_ + " down" + ec))
      << down.out;
  EXPECT_EQ(ping(15).size(), 0u) << "traffic still crosses the tunnel with one end down";
  // The same on host b: both ends down, both regions fail over to the VPN (30 ms, jitter).
  ASSERT_EQ(on(1, "link " + lab_ + " down" + ec).rc, 0);
  const double backup = median_ms();
  EXPECT_GT(backup, base + 5) << "not on the VPN";
  // Up on both: back on Express Connect.
  CmdResult up = on(0, "link " + lab_ + " up" + ec);
  ASSERT_EQ(up.rc, 0) << up.out;
  ASSERT_EQ(on(1, "link " + lab_ + " up" + ec).rc, 0);
  const double back = median_ms();
  EXPECT_LT(back, backup - 5) << "not back on Express Connect";

  // Delay: 45 ms on Express Connect from host a changes its part, one direction's 20 ms more;
  // from host b the other's. Reset on both: as before.
  CmdResult set = on(0, "link " + lab_ + " set" + ec + " --delay 45ms");
  ASSERT_EQ(set.rc, 0) << set.out;
  EXPECT_TRUE(contains(set.out, "until then the link is half changed")) << set.out;
  EXPECT_TRUE(contains(set.out, "--delay 45ms")) << set.out;
  const double half = median_ms();
  EXPECT_GT(half, back + 12) << "host a's part not delayed";
  EXPECT_LT(half, back + 30) << "host a changed both directions";
  ASSERT_EQ(on(1, "link " + lab_ + " set" + ec + " --delay 45ms").rc, 0);
  EXPECT_GT(median_ms(), back + 32) << "host b's part not delayed";
  ASSERT_EQ(on(0, "link " + lab_ + " reset" + ec).rc, 0);
  ASSERT_EQ(on(1, "link " + lab_ + " reset" + ec).rc, 0);
  EXPECT_LT(median_ms(), back + 8);

  // Loss, a fault by hand on host a (no --for: it stays): the direction host a holds drops half
  // of what crosses, so about half the pings go unanswered (40 pings: 4..36 is far beyond the
  // binomial spread); `link reset` takes it away.
  CmdResult loss = on(0, "fault " + lab_ + " loss hz/tr bj/tr --link ec --loss 50%");
  ASSERT_EQ(loss.rc, 0) << loss.out;
  EXPECT_TRUE(contains(loss.out,
                       "on this host only: hz/tr:ec <-> bj/tr:ec: the far end bj/tr:ec "
                       "is on host b"))
      << loss.out;
  const size_t lossy = ping(40).size();
  EXPECT_GE(lossy, 4u);
  EXPECT_LE(lossy, 36u);
  ASSERT_EQ(on(0, "link " + lab_ + " reset" + ec).rc, 0);
  EXPECT_GE(ping(40).size(), 38u);

  // Each change is an event of host a's, saying it was a's end only.
  CmdResult ev = hosts_->run(0, "cat /run/testbedctl/" + lab_ + "/events.jsonl");
  EXPECT_TRUE(contains(ev.out, "host a's end hz/tr:ec only (the other is on host b)")) << ev.out;
}

}  // namespace
}  // namespace tb::e2e
