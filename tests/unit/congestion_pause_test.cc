// The congestion agent's pure decisions (congestion/pause.h) on synthetic time: hysteresis,
// paused_by sets, the activity filter, hop by hop, the pause quantum, ownership, leftovers and
// the adaptive poll interval.
#include <gtest/gtest.h>

#include <vector>

#include <nlohmann/json.hpp>

#include "congestion/pause.h"
#include "congestion/stats.h"

namespace tb::congestion {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr uint64_t kRate = 12'500'000;  // 100 Mbit/s

// Two switch ports: port 0 fed by upstreams 0 and 1, port 1 fed by upstreams 1 and 2.
PauseConfig two_ports() {
  PauseConfig c;
  c.ports = {{true, 40'000, 14'000, {0, 1}}, {true, 40'000, 14'000, {1, 2}}};
  c.upstreams = {{kRate, 84 * kMs}, {kRate, 84 * kMs}, {kRate, 84 * kMs}};
  return c;
}

// Drives a machine with explicit samples; rx counters grow by `rx_per_ms` for active feeders.
struct Driver {
  PauseMachine m;
  int64_t now = 0;
  std::vector<PortSample> ports;
  std::vector<UpstreamSample> ups;
  explicit Driver(PauseConfig c)
      : m(c), ports(c.ports.size(), PortSample{true, 0}), ups(c.upstreams.size()) {
    for (auto& u : ups) u.rx_seen = true;
  }
  // Advances `ms`, adds `rx` bytes to each upstream's counter in `sending`, polls.
  std::vector<Command> poll(int64_t ms, const std::vector<int>& sending, uint64_t rx = 100'000) {
    now += ms * kMs;
    for (int s : sending) ups[static_cast<size_t>(s)].rx_bytes += rx;
    auto out = m.step(now, ports, ups);
    for (auto& u : ups) u.tbf_rate = 0;
    return out;
  }
  void backlog(int port, uint64_t b) { ports[static_cast<size_t>(port)].backlog = b; }
};

std::vector<int> ups_of(const std::vector<Command>& cs, bool pause) {
  std::vector<int> v;
  for (const auto& c : cs)
    if (c.pause == pause) v.push_back(c.upstream);
  return v;
}

TEST(CongestionPauseTest, XoffPausesTheActiveFeedersAndXonResumesThemWithHysteresis) {
  Driver d(two_ports());
  EXPECT_TRUE(d.poll(1, {0, 1}).empty());
  d.backlog(0, 30'000);  // between xon and xoff: nothing
  EXPECT_TRUE(d.poll(1, {0, 1}).empty());
  d.backlog(0, 40'001);
  auto cs = d.poll(1, {0, 1});
  EXPECT_EQ(ups_of(cs, true), (std::vector<int>{0, 1}));
  for (const auto& c : cs) EXPECT_EQ(c.reason, Reason::kXoff);
  EXPECT_EQ(d.m.ports()[0].xoff_events, 1u);
  EXPECT_EQ(d.m.upstreams()[0].paused_by, (std::vector<int>{0}));
  // Still above xon: no command, the pause stands (never re-sent).
  d.backlog(0, 20'000);
  EXPECT_TRUE(d.poll(1, {}).empty());
  EXPECT_TRUE(d.m.upstreams()[0].paused);
  d.backlog(0, 13'999);
  cs = d.poll(1, {});
  EXPECT_EQ(ups_of(cs, false), (std::vector<int>{0, 1}));
  EXPECT_EQ(cs[0].reason, Reason::kXon);
  EXPECT_FALSE(d.m.upstreams()[1].paused);
  EXPECT_EQ(d.m.upstreams()[0].pauses, 1u);
  EXPECT_EQ(d.m.paused_ns(0, d.now), 2 * kMs);
  EXPECT_EQ(d.m.ports()[0].backlog_max, 40'001u);
}

TEST(CongestionPauseTest, AnUpstreamResumesOnlyWhenEveryPortThatPausedItIsBelowXon) {
  Driver d(two_ports());
  d.poll(1, {0, 1, 2});
  d.backlog(0, 50'000);
  d.backlog(1, 50'000);
  auto cs = d.poll(1, {0, 1, 2});
  EXPECT_EQ(ups_of(cs, true), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(d.m.upstreams()[1].paused_by, (std::vector<int>{0, 1}));
  d.backlog(0, 1'000);  // port 0 drains: upstream 0 resumes, 1 is still held by port 1
  cs = d.poll(1, {});
  EXPECT_EQ(ups_of(cs, false), (std::vector<int>{0}));
  EXPECT_TRUE(d.m.upstreams()[1].paused);
  EXPECT_EQ(d.m.upstreams()[1].paused_by, (std::vector<int>{1}));
  d.backlog(1, 1'000);
  cs = d.poll(1, {});
  EXPECT_EQ(ups_of(cs, false), (std::vector<int>{1, 2}));
}

TEST(CongestionPauseTest, OnlyFeedersThatReceivedOnePercentOfTheirRateInFourMsArePaused) {
  Driver d(two_ports());
  d.poll(1, {0, 1});
  // 1% of 12.5 MB/s over 1 ms is 125 B: upstream 0 sends 100 KB/ms, upstream 1 100 B/ms.
  for (int i = 0; i < 5; ++i) {
    d.poll(1, {0});
    d.ups[1].rx_bytes += 100;
  }
  d.backlog(0, 50'000);
  auto cs = d.poll(1, {0}, 100'000);
  EXPECT_EQ(ups_of(cs, true), (std::vector<int>{0}));
  EXPECT_FALSE(d.m.upstreams()[1].paused);
  // Upstream 1 starts sending: the next poll in XOFF pauses it too.
  cs = d.poll(1, {0, 1});
  EXPECT_EQ(ups_of(cs, true), (std::vector<int>{1}));
  EXPECT_EQ(d.m.upstreams()[1].paused_by, (std::vector<int>{0}));
}

TEST(CongestionPauseTest, AFeederThatStoppedWithinFourMsStillCounts) {
  Driver d(two_ports());
  d.poll(1, {0, 1});
  d.poll(1, {0, 1});
  d.poll(1, {0});  // upstream 1 stopped 1 ms ago: still active (window 4 ms)
  d.backlog(0, 50'000);
  auto cs = d.poll(1, {0});
  EXPECT_EQ(ups_of(cs, true), (std::vector<int>{0, 1}));
  Driver e(two_ports());
  e.poll(1, {0, 1});
  for (int i = 0; i < 6; ++i) e.poll(1, {0});  // upstream 1 idle for 6 ms
  e.backlog(0, 50'000);
  EXPECT_EQ(ups_of(e.poll(1, {0}), true), (std::vector<int>{0}));
}

TEST(CongestionPauseTest, HopByHopAPausedUpstreamThatIsAPolledPortPausesItsOwnFeeders) {
  // Port 0 (a spine's egress toward a ToR) is fed by upstream 0, the ToR's `sp0` TBF, which is
  // port 1 (polled too) and is fed by upstreams 1 and 2 (GPU rails).
  PauseConfig c;
  c.ports = {{true, 40'000, 14'000, {0}}, {true, 40'000, 14'000, {1, 2}}};
  c.upstreams = {{kRate, 84 * kMs}, {kRate, 84 * kMs}, {kRate, 84 * kMs}};
  Driver d(c);
  d.poll(1, {0, 1, 2});
  d.backlog(0, 50'000);
  EXPECT_EQ(ups_of(d.poll(1, {0, 1, 2}), true), (std::vector<int>{0}));
  d.backlog(1, 45'000);            // the paused sp0 fills
  d.ups[0].tbf_rate = kPauseRate;  // as its dump shows it
  EXPECT_EQ(ups_of(d.poll(1, {1, 2}), true), (std::vector<int>{1, 2}));
  d.backlog(0, 5'000);  // the spine port drains: sp0 resumes, the GPUs stay until sp0 drains
  auto cs = d.poll(1, {});
  EXPECT_EQ(ups_of(cs, false), (std::vector<int>{0}));
  EXPECT_TRUE(d.m.upstreams()[1].paused);
  d.backlog(1, 5'000);
  EXPECT_EQ(ups_of(d.poll(1, {}), false), (std::vector<int>{1, 2}));
}

TEST(CongestionPauseTest, APauseNotRefreshedWithinItsQuantumExpiresAndIsCounted) {
  PauseConfig c = two_ports();
  c.upstreams[0].quantum_ns = 20 * kMs;
  Driver d(c);
  d.poll(1, {0, 1});
  d.backlog(0, 50'000);
  d.poll(1, {0, 1});
  ASSERT_TRUE(d.m.upstreams()[0].paused);
  d.poll(19, {});  // on time: refreshed
  EXPECT_TRUE(d.m.upstreams()[0].paused);
  auto cs = d.poll(25, {});  // the agent slept past the 20 ms quantum
  ASSERT_EQ(ups_of(cs, false), (std::vector<int>{0}));
  EXPECT_EQ(cs[0].reason, Reason::kExpired);
  EXPECT_EQ(d.m.upstreams()[0].pause_expired, 1u);
  EXPECT_TRUE(d.m.upstreams()[1].paused);  // 84 ms quantum: still in force
  // Still above XOFF: the next poll pauses it again.
  cs = d.poll(1, {0});
  EXPECT_EQ(ups_of(cs, true), (std::vector<int>{0}));
  EXPECT_EQ(d.m.upstreams()[0].pauses, 2u);
}

TEST(CongestionPauseTest, APausedUpstreamShowingAnotherRateIsPausedAgain) {
  Driver d(two_ports());
  d.poll(1, {0, 1});
  d.backlog(0, 50'000);
  d.poll(1, {0, 1});
  d.ups[0].tbf_rate = kPauseRate;  // as it should be
  EXPECT_TRUE(d.poll(1, {}).empty());
  d.ups[0].tbf_rate = kRate;  // someone restored it (a `link set`, a fault)
  auto cs = d.poll(1, {});
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_TRUE(cs[0].pause);
  EXPECT_EQ(cs[0].reason, Reason::kOwnership);
  EXPECT_EQ(d.m.upstreams()[0].repaused, 1u);
  EXPECT_EQ(d.m.upstreams()[0].pauses, 1u);  // the same pause, enforced again
}

TEST(CongestionPauseTest, AnUpstreamLeftAtThePauseRateIsResumed) {
  Driver d(two_ports());
  d.ups[2].tbf_rate = kPauseRate;  // a killed agent's pause
  auto cs = d.poll(1, {});
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_FALSE(cs[0].pause);
  EXPECT_EQ(cs[0].upstream, 2);
  EXPECT_EQ(cs[0].reason, Reason::kLeftover);
  EXPECT_EQ(d.m.upstreams()[2].leftovers, 1u);
}

TEST(CongestionPauseTest, ThePollIsFastWhileAQueueBuildsOrAPauseStandsAndFor50MsAfter) {
  PauseConfig c = two_ports();
  c.poll_ns = 1 * kMs;
  c.idle_poll_ns = 10 * kMs;
  Driver d(c);
  d.poll(10, {0});
  EXPECT_EQ(d.m.interval_ns(d.now), 10 * kMs);
  d.backlog(0, 10'001);  // over xoff / 4
  d.poll(10, {0});
  EXPECT_EQ(d.m.interval_ns(d.now), 1 * kMs);
  d.backlog(0, 0);
  d.poll(1, {});
  EXPECT_EQ(d.m.interval_ns(d.now + 48 * kMs), 1 * kMs);
  EXPECT_EQ(d.m.interval_ns(d.now + 60 * kMs), 10 * kMs);
}

TEST(CongestionPauseTest, ResumeAllResumesEveryPausedUpstreamOnce) {
  Driver d(two_ports());
  d.poll(1, {0, 1, 2});
  d.backlog(0, 50'000);
  d.poll(1, {0, 1, 2});
  auto cs = d.m.resume_all(d.now + kMs);
  EXPECT_EQ(ups_of(cs, false), (std::vector<int>{0, 1}));
  EXPECT_TRUE(d.m.resume_all(d.now + 2 * kMs).empty());
}

TEST(CongestionPauseTest, EcnPortsArePolledButNeverPause) {
  PauseConfig c = two_ports();
  c.ports[0].lossless = false;
  Driver d(c);
  d.poll(1, {0, 1});
  d.backlog(0, 500'000);
  EXPECT_TRUE(d.poll(1, {0, 1}).empty());
  EXPECT_EQ(d.m.ports()[0].backlog_max, 500'000u);
}

// The stats file's document: what the agent writes is what status and the tests read back.
TEST(CongestionStatsTest, TheStatsDocumentRoundTrips) {
  AgentStats s;
  s.pid = 42;
  s.uptime_s = 7.5;
  s.cpu_s = 0.25;
  s.sched = "SCHED_FIFO 11";
  s.polls = 6000;
  s.late_polls = 3;
  s.late_ms_max = 2.5;
  s.poll_ms_p99 = 0.7;
  s.stopped = true;
  s.ports["dc/tor0:s4g0"] = {"lossless", 1000, 250'000, 0, 12};
  UpstreamStats u;
  u.pauses = 12;
  u.paused_ns = 5'000'000;
  u.paused_now = true;
  u.pause_expired = 1;
  u.by["dc/tor0:s4g0"] = 12;
  s.upstreams["dc/s0/g0:rail"] = u;
  const AgentStats r = stats_from_json(nlohmann::json::parse(to_json(s).dump()));
  EXPECT_EQ(r.pid, 42);
  EXPECT_EQ(r.sched, "SCHED_FIFO 11");
  EXPECT_EQ(r.late_polls, 3u);
  EXPECT_DOUBLE_EQ(r.late_ms_max, 2.5);
  EXPECT_TRUE(r.stopped);
  ASSERT_EQ(r.ports.count("dc/tor0:s4g0"), 1u);
  EXPECT_EQ(r.ports.at("dc/tor0:s4g0").backlog_max, 250'000u);
  EXPECT_EQ(r.ports.at("dc/tor0:s4g0").xoff_events, 12u);
  ASSERT_EQ(r.upstreams.count("dc/s0/g0:rail"), 1u);
  const UpstreamStats& x = r.upstreams.at("dc/s0/g0:rail");
  EXPECT_EQ(x.pauses, 12u);
  EXPECT_EQ(x.paused_ns, 5'000'000);
  EXPECT_TRUE(x.paused_now);
  EXPECT_EQ(x.pause_expired, 1u);
  EXPECT_EQ(x.by.at("dc/tor0:s4g0"), 12u);
  EXPECT_EQ(stats_from_json(nlohmann::json::array()).pid, 0);  // not an object: defaults
}

}  // namespace
}  // namespace tb::congestion
