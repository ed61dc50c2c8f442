// The congestion agent's pure decisions (congestion/pause.h) on synthetic time: hysteresis,
// paused_by sets, the activity filter, hop by hop, the pause quantum, ownership, leftovers and
// the adaptive poll interval.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "congestion/control.h"
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

// An ecn port (P7) never pauses: its marking probability follows its backlog each poll
// (stage/mark_table.h mark_probability), and a backlog past a quarter of kmin keeps the fast
// poll; its figures go to the stats document under "ecn".
TEST(CongestionPauseTest, AnEcnPortPublishesItsMarkingProbabilityAndNeverPauses) {
  PauseConfig c;
  PauseConfig::Port e;
  e.lossless = false;
  e.ecn = true;
  e.kmin = 3'000;
  e.kmax = 6'000;
  e.pmax = 0.01;
  c.ports = {e};
  c.poll_ns = 1 * kMs;
  c.idle_poll_ns = 10 * kMs;
  Driver d(c);
  EXPECT_TRUE(d.poll(10, {}).empty());
  EXPECT_EQ(d.m.ports()[0].marking_p, 0u);
  EXPECT_EQ(d.m.interval_ns(d.now), 10 * kMs);
  d.backlog(0, 4'500);
  EXPECT_TRUE(d.poll(10, {}).empty());
  EXPECT_NEAR(d.m.ports()[0].marking_p / 4294967296.0, 0.005, 1e-9);
  EXPECT_EQ(d.m.interval_ns(d.now), 1 * kMs);  // a queue builds: fast
  d.backlog(0, 20'000);
  EXPECT_TRUE(d.poll(1, {}).empty());
  EXPECT_EQ(d.m.ports()[0].marking_p, 0xffffffffu);
  EXPECT_EQ(d.m.ports()[0].xoff_events, 0u);
  d.backlog(0, 0);
  EXPECT_TRUE(d.poll(1, {}).empty());
  EXPECT_EQ(d.m.ports()[0].marking_p, 0u);
  // The stats document carries an ecn port's counts, and only an ecn port's.
  AgentStats st;
  st.ports["dc/vpc:s4"] = {"ecn", 100, 9000, 3, 0};
  st.ports["dc/vpc:s4"].ecn = {0.25, 1000, 40, 7};
  st.ports["dc/tor0:s4g0"] = {"lossless", 0, 0, 0, 0};
  const AgentStats back = stats_from_json(to_json(st));
  EXPECT_EQ(back.ports.at("dc/vpc:s4").ecn.ce_marks, 40u);
  EXPECT_EQ(back.ports.at("dc/vpc:s4").ecn.ect, 1000u);
  EXPECT_EQ(back.ports.at("dc/vpc:s4").ecn.not_ect, 7u);
  EXPECT_DOUBLE_EQ(back.ports.at("dc/vpc:s4").ecn.marking_p, 0.25);
  EXPECT_FALSE(to_json(st)["ports"]["dc/tor0:s4g0"].contains("ecn"));
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

// The idle wake's budget (congestion/wake.h): what may still be offered to a port before a poll
// could see it past a quarter of its xoff (kmin for an ecn port; the lower where both), counted
// from the backlog the last step saw.
TEST(CongestionPauseTest, WakeHeadroomIsWhatMayArriveBeforeTheFastThreshold) {
  PauseConfig c = two_ports();  // xoff 40'000: fast past 10'000
  PauseConfig::Port e;
  e.lossless = false;
  e.ecn = true;
  e.kmin = 3'000;  // fast past 750
  e.kmax = 6'000;
  e.pmax = 0.01;
  c.ports.push_back(e);
  PauseConfig::Port both = c.ports[0];
  both.ecn = true;
  both.kmin = 8'000;  // fast past 2'000, below xoff / 4's 10'000
  c.ports.push_back(both);
  PauseConfig::Port neither;
  neither.lossless = false;
  c.ports.push_back(neither);
  Driver d(c);
  d.poll(10, {});
  EXPECT_EQ(d.m.wake_headroom(0), 10'000u);
  EXPECT_EQ(d.m.wake_headroom(2), 750u);
  EXPECT_EQ(d.m.wake_headroom(3), 2'000u);
  EXPECT_EQ(d.m.wake_headroom(4), UINT64_MAX);  // nothing it does depends on its queue
  d.backlog(0, 6'000);
  d.backlog(2, 900);
  d.poll(10, {});
  EXPECT_EQ(d.m.wake_headroom(0), 4'000u);
  EXPECT_EQ(d.m.wake_headroom(2), 0u);  // past it already (and fast)
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

// Storms and the watchdog (design §6): port 0 of two_ports() held paused from outside.
PauseConfig watched() {
  PauseConfig c = two_ports();
  c.watchdog_ns = 200 * kMs;
  c.restore_ns = 200 * kMs;
  return c;
}

std::vector<PortAction> actions_on(const PauseMachine& m, int port) {
  std::vector<PortAction> v;
  for (const auto& c : m.port_commands())
    if (c.port == port) v.push_back(c.action);
  return v;
}

// Polls every ms while port 0 stays held with `backlog` and sends nothing; the time of the
// first detect event (ms since `from`), or -1 within `max_ms`.
int64_t ms_to_detect(Driver& d, int64_t from, uint64_t backlog, int64_t max_ms) {
  d.backlog(0, backlog);
  for (int64_t i = 0; i < max_ms; ++i) {
    d.poll(1, {});
    for (const auto& e : d.m.watchdog_events())
      if (e.port == 0 && e.detect) return (d.now - from) / kMs;
  }
  return -1;
}

TEST(CongestionWatchdogTest, AHeldPortThatSendsNothingIsDetectedWithinOnePollOfTheWatchdog) {
  Driver d(watched());
  d.poll(1, {0, 1});
  d.ports[0].bytes = 5'000'000;
  d.m.set_storm(0, true);
  d.poll(1, {});
  ASSERT_EQ(actions_on(d.m, 0), (std::vector<PortAction>{PortAction::kHold}));
  const int64_t held = d.now;
  EXPECT_TRUE(d.m.ports()[0].held);
  // The first sample after the hold shows the pause's leak (one frame): not progress.
  d.ports[0].bytes += 1514;
  d.ports[0].tbf_rate = kPauseRate;
  const int64_t t = ms_to_detect(d, held, 300'000, 400);
  std::printf("[watchdog] detected %lld ms after the hold (watchdog 200 ms, poll 1 ms)\n",
              static_cast<long long>(t));
  EXPECT_GE(t, 200);
  EXPECT_LE(t, 201);
  ASSERT_EQ(d.m.watchdog_events().size(), 1u);
  EXPECT_EQ(d.m.watchdog_events()[0].paused_ns, t * kMs);
  EXPECT_EQ(actions_on(d.m, 0), (std::vector<PortAction>{PortAction::kMitigate}));
  EXPECT_EQ(d.m.ports()[0].trips, 1u);
  EXPECT_TRUE(d.m.ports()[0].mitigating);
  // Its queue passed XOFF while held: the storm spread to its feeders, as in the field.
  EXPECT_TRUE(d.m.upstreams()[0].paused);
}

TEST(CongestionWatchdogTest,
     MitigationDropsForRestoreThenHoldsAgainAndAPersistingStormIsFoundAgain) {
  Driver d(watched());
  d.poll(1, {});
  d.m.set_storm(0, true);
  d.poll(1, {});
  d.ports[0].tbf_rate = kPauseRate;
  d.ports[0].drops = 7;
  ASSERT_GE(ms_to_detect(d, d.now, 100'000, 400), 200);
  const int64_t detected = d.now;
  // Mitigating: its TBF at its rate with a 1-byte limit; what arrives is dropped and counted.
  d.ports[0].tbf_rate = kRate;
  bool restored = false;
  for (int i = 0; i < 300 && !restored; ++i) {
    d.ports[0].drops += 10;
    d.ports[0].bytes += 12'500;  // what it held drains
    d.backlog(0, i < 20 ? 100'000 - 5'000 * static_cast<uint64_t>(i) : 0);
    d.poll(1, {});
    if (i == 100) {
      EXPECT_EQ(d.m.dropped(0), 1010u);
      EXPECT_TRUE(actions_on(d.m, 0).empty());  // nothing re-sent while it mitigates
    }
    for (const auto& e : d.m.watchdog_events())
      if (!e.detect) {
        restored = true;
        EXPECT_EQ(e.dropped, static_cast<uint64_t>(10 * (i + 1)));
      }
  }
  ASSERT_TRUE(restored);
  EXPECT_EQ((d.now - detected) / kMs, 200);
  // The storm still asks: held again (its own limit back), and detected again a watchdog later.
  EXPECT_EQ(actions_on(d.m, 0), (std::vector<PortAction>{PortAction::kHold}));
  EXPECT_FALSE(d.m.ports()[0].mitigating);
  const int64_t again = d.now;
  d.ports[0].tbf_rate = kPauseRate;
  const int64_t t = ms_to_detect(d, again, 50'000, 400);
  EXPECT_GE(t, 200);
  EXPECT_LE(t, 201);
  EXPECT_EQ(d.m.ports()[0].trips, 2u);
}

TEST(CongestionWatchdogTest, NoTripOnABusyPortAnEmptyHeldPortOrWithoutAWatchdog) {
  // Busy: far above XOFF, not held (nothing paused it from outside): never a storm.
  Driver d(watched());
  d.backlog(0, 500'000);
  for (int i = 0; i < 500; ++i) d.poll(1, {0, 1});
  EXPECT_EQ(d.m.ports()[0].trips, 0u);
  // Held but empty (nothing to send toward that GPU): no stall; traffic later starts the clock.
  Driver e(watched());
  e.m.set_storm(0, true);
  e.poll(1, {});
  e.ports[0].tbf_rate = kPauseRate;
  for (int i = 0; i < 50; ++i) e.poll(10, {});
  EXPECT_EQ(e.m.ports()[0].trips, 0u);
  EXPECT_EQ(e.m.interval_ns(e.now), 1 * kMs) << "a held storm keeps the poll fast";
  const int64_t from = e.now;
  const int64_t t = ms_to_detect(e, from, 20'000, 400);
  EXPECT_GE(t, 200);
  EXPECT_LE(t, 201);
  // Held with bytes leaving (a pause that leaks every poll, say): progress, no trip.
  Driver f(watched());
  f.m.set_storm(0, true);
  f.poll(1, {});
  f.backlog(0, 50'000);
  for (int i = 0; i < 500; ++i) {
    f.ports[0].bytes += 1500;
    f.poll(1, {});
  }
  EXPECT_EQ(f.m.ports()[0].trips, 0u);
  // No watchdog (watchdog_ns 0): held for good.
  PauseConfig c = two_ports();
  Driver g(c);
  g.m.set_storm(0, true);
  g.poll(1, {});
  g.backlog(0, 50'000);
  for (int i = 0; i < 500; ++i) g.poll(1, {});
  EXPECT_EQ(g.m.ports()[0].trips, 0u);
  EXPECT_TRUE(g.m.ports()[0].held);
}

TEST(CongestionWatchdogTest, LiftingTheStormReleasesThePortAlsoWhileItMitigates) {
  Driver d(watched());
  d.m.set_storm(0, true);
  d.poll(1, {});
  d.poll(50, {});
  d.m.set_storm(0, false);
  d.poll(1, {});
  EXPECT_EQ(actions_on(d.m, 0), (std::vector<PortAction>{PortAction::kRelease}));
  EXPECT_FALSE(d.m.ports()[0].held);
  // While mitigating: the mitigation ends at once (restore event) and the port is released.
  d.m.set_storm(0, true);
  d.poll(1, {});
  ASSERT_GE(ms_to_detect(d, d.now, 10'000, 400), 200);
  d.poll(20, {});
  d.m.set_storm(0, false);
  d.poll(1, {});
  EXPECT_EQ(actions_on(d.m, 0), (std::vector<PortAction>{PortAction::kRelease}));
  ASSERT_EQ(d.m.watchdog_events().size(), 1u);
  EXPECT_FALSE(d.m.watchdog_events()[0].detect);
  EXPECT_FALSE(d.m.ports()[0].mitigating);
  // Nothing more: no storm, nothing held.
  d.poll(1, {});
  EXPECT_TRUE(d.m.port_commands().empty());
}

TEST(CongestionWatchdogTest, OwnershipLeftoversAndResumeAllCoverHeldPorts) {
  Driver d(watched());
  d.m.set_storm(0, true);
  d.poll(1, {});
  d.ports[0].tbf_rate = kRate;  // a `link set` while held
  d.poll(1, {});
  EXPECT_EQ(actions_on(d.m, 0), (std::vector<PortAction>{PortAction::kHold}));
  EXPECT_EQ(d.m.ports()[0].storm_repaused, 1u);
  d.ports[0].tbf_rate = kPauseRate;
  d.poll(1, {});
  EXPECT_TRUE(d.m.port_commands().empty());
  d.m.resume_all(d.now + kMs);
  EXPECT_EQ(actions_on(d.m, 0), (std::vector<PortAction>{PortAction::kRelease}));
  // A killed agent's hold, found by the next one: released.
  Driver e(watched());
  e.ports[1].tbf_rate = kPauseRate;
  e.poll(1, {});
  EXPECT_EQ(actions_on(e.m, 1), (std::vector<PortAction>{PortAction::kRelease}));
  EXPECT_EQ(e.m.ports()[1].leftovers, 1u);
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
  s.wake = "cls_bpf byte counters on 4 port(s)";
  s.wake_checks = 900;
  s.wakes = 2;
  s.stopped = true;
  s.ports["dc/tor0:s4g0"] = {"lossless", 1000, 250'000, 0, 12};
  s.ports["dc/tor0:s4g0"].storm = true;
  s.ports["dc/tor0:s4g0"].watchdog = {3, true, 410};
  s.generation = 7;
  s.control_error = "storm port x: not a port this agent polls";
  s.control_applied_ns = 123'456'789;
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
  EXPECT_EQ(r.wake, "cls_bpf byte counters on 4 port(s)");
  EXPECT_EQ(r.wake_checks, 900u);
  EXPECT_EQ(r.wakes, 2u);
  EXPECT_TRUE(r.stopped);
  ASSERT_EQ(r.ports.count("dc/tor0:s4g0"), 1u);
  EXPECT_EQ(r.ports.at("dc/tor0:s4g0").backlog_max, 250'000u);
  EXPECT_EQ(r.ports.at("dc/tor0:s4g0").xoff_events, 12u);
  EXPECT_TRUE(r.ports.at("dc/tor0:s4g0").storm);
  EXPECT_EQ(r.ports.at("dc/tor0:s4g0").watchdog.trips, 3u);
  EXPECT_TRUE(r.ports.at("dc/tor0:s4g0").watchdog.mitigating);
  EXPECT_EQ(r.ports.at("dc/tor0:s4g0").watchdog.dropped, 410u);
  EXPECT_EQ(r.generation, 7u);
  EXPECT_EQ(r.control_error, s.control_error);
  EXPECT_EQ(r.control_applied_ns, 123'456'789);
  ASSERT_EQ(r.upstreams.count("dc/s0/g0:rail"), 1u);
  const UpstreamStats& x = r.upstreams.at("dc/s0/g0:rail");
  EXPECT_EQ(x.pauses, 12u);
  EXPECT_EQ(x.paused_ns, 5'000'000);
  EXPECT_TRUE(x.paused_now);
  EXPECT_EQ(x.pause_expired, 1u);
  EXPECT_EQ(x.by.at("dc/tor0:s4g0"), 12u);
  EXPECT_EQ(stats_from_json(nlohmann::json::array()).pid, 0);  // not an object: defaults
}

// The control document a pfc-storm writes and the agent reads (congestion/control.h).
TEST(CongestionControlTest, TheControlDocumentRoundTripsAndStormsAreAddedAndLifted) {
  ControlDoc d;
  d = with_storms(d, {"dc/tor0:s1g0", "dc/tor0:s0g0"}, true);
  EXPECT_EQ(d.generation, 1u);
  EXPECT_EQ(d.storms, (std::vector<std::string>{"dc/tor0:s0g0", "dc/tor0:s1g0"}));
  d = with_storms(d, {"dc/tor0:s0g0"}, true);  // already held: once
  EXPECT_EQ(d.storms.size(), 2u);
  EXPECT_EQ(d.generation, 2u);
  auto back = control_from_json(nlohmann::json::parse(to_json(d).dump()), "c.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, d);
  d = with_storms(d, {"dc/tor0:s1g0", "dc/tor9:s9g9"}, false);
  EXPECT_EQ(d.storms, (std::vector<std::string>{"dc/tor0:s0g0"}));
  EXPECT_EQ(d.generation, 3u);
  // A missing file: generation 0, nothing held.
  auto none = read_control("/nonexistent/congestion.control.json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->generation, 0u);
  EXPECT_TRUE(none->storms.empty());
}

TEST(CongestionControlTest, ABadControlDocumentNamesTheFileAndField) {
  auto bad = [](const char* text) {
    auto r = control_from_json(nlohmann::json::parse(text), "congestion.control.json");
    EXPECT_FALSE(r) << text;
    if (r) return std::string();
    EXPECT_EQ(r.error().exit_code, 2);
    return r.error().message;
  };
  EXPECT_EQ(bad(R"([1])"),
            "congestion.control.json: must be a JSON object "
            "{\"generation\": N, \"storms\": [...]}");
  EXPECT_EQ(bad(R"({"storms": []})"),
            "congestion.control.json: generation: must be a whole number >= 0");
  EXPECT_EQ(bad(R"({"generation": 1, "storm": []})"),
            "congestion.control.json: unknown key \"storm\"; valid: generation, storms");
  EXPECT_EQ(bad(R"({"generation": 1, "storms": [{"port": "a:b"}, {"port": 3}]})"),
            "congestion.control.json: storms[1].port: must be a string naming a polled port, "
            "e.g. \"dc/tor0:s4g0\"");
  EXPECT_EQ(bad(R"({"generation": 1, "storms": [{"port": "a:b", "for": 2}]})"),
            "congestion.control.json: storms[0]: only \"port\" is valid here");
}

}  // namespace
}  // namespace tb::congestion
