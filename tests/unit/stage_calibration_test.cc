// stage/calibration.h: the arithmetic that takes the delay stage's own cost out of the configured
// delay — kernel stamps, release cost, the queue-latency median, the timer's advance and its
// spin budget — with every time passed in; and the stats document's calibration fields.
#include <gtest/gtest.h>

#include "stage/calibration.h"
#include "stage/delay_line.h"
#include "stage/stats.h"

namespace tb::stage {
namespace {

constexpr int64_t kUs = 1'000;
constexpr int64_t kMs = 1'000'000;
// A CLOCK_REALTIME instant (2026) and an unrelated CLOCK_MONOTONIC one.
constexpr int64_t kReal = 1'796'000'000 * 1'000'000'000LL;
constexpr int64_t kMono = 5'000 * 1'000'000'000LL;

TEST(Calibration, StampAge) {
  EXPECT_FALSE(stamp_age_ns(0, kReal));  // no stamp
  // µs stamps: the age is taken 999 ns short, so a deadline is never early.
  EXPECT_EQ(stamp_age_ns(kReal - 30 * kUs, kReal), 30 * kUs - 999);
  EXPECT_EQ(stamp_age_ns(kReal, kReal + 500), 0);  // within the stamp's own microsecond
  EXPECT_EQ(stamp_age_ns(kReal, kReal), 0);
  EXPECT_FALSE(stamp_age_ns(kReal + 1, kReal));  // future: not a receive time (clock stepped)
  // A CLOCK_MONOTONIC departure time (a TCP sender's EDT) is decades "old": not believed.
  EXPECT_FALSE(stamp_age_ns(kMono, kReal));
  EXPECT_FALSE(stamp_age_ns(kReal - kMaxStampAgeNs - 2 * kUs, kReal));  // stale
  EXPECT_TRUE(stamp_age_ns(kReal - kMaxStampAgeNs + 2 * kUs, kReal));
}

TEST(Calibration, DeadlineSubtractsTheReleaseCostNeverBelowZero) {
  EXPECT_EQ(release_deadline(100 * kUs, 250 * kUs, 10 * kUs), 340 * kUs);
  EXPECT_EQ(release_deadline(100 * kUs, 10 * kUs, 10 * kUs), 100 * kUs);
  EXPECT_EQ(release_deadline(100 * kUs, 4 * kUs, 10 * kUs), 100 * kUs);  // not before arrival
  EXPECT_EQ(release_deadline(100 * kUs, 0, 10 * kUs), 100 * kUs);
  EXPECT_EQ(release_deadline(100 * kUs, 10 * kMs, 0), 100 * kUs + 10 * kMs);
}

TEST(Calibration, SampleWindowQuantiles) {
  SampleWindow w(0.5, 8, 4);
  EXPECT_FALSE(w.value());
  w.add(10);
  EXPECT_EQ(w.value(), 10);  // the first samples count at once
  for (int64_t v : {20, 30, 40}) w.add(v);
  EXPECT_EQ(w.value(), 30);  // upper median of {10,20,30,40}
  // The window keeps the last 8: after 8 large samples the small ones are gone.
  for (int i = 0; i < 8; ++i) w.add(1000 + i);
  EXPECT_GE(*w.value(), 1000);
  EXPECT_EQ(w.count(), 12u);
  SampleWindow p90(0.9, 64, 8);
  for (int64_t v = 1; v <= 96; ++v) p90.add(v);  // the window holds 33..96
  EXPECT_EQ(p90.value(), 90);
}

TEST(Calibration, StampedPacketsCountFromTheKernelOthersFromTheMedian) {
  QueueCalibration c;
  EXPECT_EQ(c.queue_ns(), 0);
  EXPECT_EQ(c.overhead_ns(), kReleaseCostNs);
  // Unstamped before any stamp: no latency known, so the arrival is the read time.
  EXPECT_EQ(c.arrival_ns(0, kReal, kMono), kMono);
  // Stamped 30/40/50 µs before the read: the arrival is the stamp, on the monotonic clock.
  EXPECT_EQ(c.arrival_ns(kReal - 30 * kUs, kReal, kMono), kMono - 30 * kUs + 999);
  c.arrival_ns(kReal - 40 * kUs, kReal, kMono);
  c.arrival_ns(kReal - 50 * kUs, kReal, kMono);
  EXPECT_EQ(c.queue_ns(), 40 * kUs - 999);
  EXPECT_EQ(c.overhead_ns(), 40 * kUs - 999 + kReleaseCostNs);
  // Now an unstamped packet (or one with a monotonic stamp) counts from read - median.
  EXPECT_EQ(c.arrival_ns(0, kReal, kMono), kMono - (40 * kUs - 999));
  EXPECT_EQ(c.arrival_ns(kMono, kReal, kMono), kMono - (40 * kUs - 999));
  EXPECT_EQ(c.stamped(), 3u);
  EXPECT_EQ(c.unstamped(), 3u);
}

// A queue that only ever sees unstamped packets (a server's egress: the kernel stamps only what
// it receives) takes the stage's wake-up latency, bounded by the time since the socket was last
// found empty; a queue with stamps of its own keeps its own median.
TEST(Calibration, UnstampedQueuesTakeTheWakeLatencyBoundedBySinceEmpty) {
  QueueCalibration egress;
  EXPECT_EQ(egress.arrival_ns(0, kReal, kMono, {std::nullopt, INT64_MAX}), kMono);
  EXPECT_EQ(egress.arrival_ns(0, kReal, kMono, {25 * kUs, INT64_MAX}), kMono - 25 * kUs);
  EXPECT_EQ(egress.queue_ns(), 25 * kUs);  // shown as its latency while it has no stamp
  EXPECT_EQ(egress.overhead_ns(), 25 * kUs + kReleaseCostNs);
  // Read 8 µs after an empty read: it waited at most 8 µs.
  EXPECT_EQ(egress.arrival_ns(0, kReal, kMono, {25 * kUs, 8 * kUs}), kMono - 8 * kUs);
  EXPECT_EQ(egress.arrival_ns(0, kReal, kMono, {25 * kUs, -5}), kMono);  // never later than read
  QueueCalibration ingress;
  ingress.arrival_ns(kReal - 40 * kUs, kReal, kMono);
  EXPECT_EQ(ingress.arrival_ns(0, kReal, kMono, {25 * kUs, INT64_MAX}), kMono - (40 * kUs - 999));
  EXPECT_EQ(ingress.arrival_ns(0, kReal, kMono, {25 * kUs, 10 * kUs}), kMono - 10 * kUs);
  // Through a line: the deadline counts from the estimated arrival.
  DelayLine line({13, Duration{250 * kUs}, Duration{0}, 1024}, 1, /*calibrated=*/true);
  ASSERT_TRUE(line.admit(1, 84, kMono, 0, kReal, {30 * kUs, INT64_MAX}));
  EXPECT_EQ(*line.next_deadline(), kMono - 30 * kUs + 250 * kUs - kReleaseCostNs);
}

TEST(WakeTimer, WakeLatencyIsTheMedianOversleep) {
  WakeTimer t;
  EXPECT_FALSE(t.wake_latency());
  for (int64_t v : {10, 20, 30, 40, 200}) t.record_oversleep(v * kUs);
  EXPECT_EQ(t.wake_latency(), 30 * kUs);
  t.record_oversleep(-3);  // an early return counts as 0
  EXPECT_EQ(t.wake_latency(), 30 * kUs);
}

TEST(Calibration, CalibratedLineLeavesAtArrivalPlusDelay) {
  DelayLine line({10, Duration{250 * kUs}, Duration{0}, 1024}, 1, /*calibrated=*/true);
  // Read 30 µs after the kernel stamped it: due at stamp + 250 µs - release cost.
  ASSERT_TRUE(line.admit(1, 84, kMono, kReal - 30 * kUs, kReal));
  EXPECT_EQ(*line.next_deadline(), kMono - 30 * kUs + 999 + 250 * kUs - kReleaseCostNs);
  // A delay below the overhead: due at once (the arrival), never before it.
  DelayLine tiny({11, Duration{5 * kUs}, Duration{0}, 1024}, 1, true);
  ASSERT_TRUE(tiny.admit(1, 84, kMono, kReal - 30 * kUs, kReal));
  EXPECT_EQ(*tiny.next_deadline(), kMono - 30 * kUs + 999);
  EXPECT_EQ(tiny.release_due(kMono), 1u);
  // Deadlines stay monotonic: a packet read late but stamped early never overtakes.
  ASSERT_TRUE(line.admit(2, 84, kMono + 10 * kUs, kReal - 200 * kUs, kReal + 10 * kUs));
  EXPECT_EQ(line.release_due(kMono + 230 * kUs), 2u);  // both, in one batch
  // Uncalibrated: stamps are ignored, the delay counts from the read.
  DelayLine plain({12, Duration{250 * kUs}, Duration{0}, 1024}, 1);
  ASSERT_TRUE(plain.admit(1, 84, kMono, kReal - 30 * kUs, kReal));
  EXPECT_EQ(*plain.next_deadline(), kMono + 250 * kUs);
  EXPECT_EQ(plain.calibration().stamped(), 0u);
}

TEST(Calibration, ReleaseSampleIsStampLessSendWithinBounds) {
  EXPECT_EQ(release_sample_ns(kReal, kReal + 14 * kUs), 14 * kUs);
  EXPECT_EQ(release_sample_ns(kReal, kReal), 0);
  EXPECT_EQ(release_sample_ns(kReal, kReal + kMaxReleaseNs), kMaxReleaseNs);
  EXPECT_EQ(release_sample_ns(kReal, 0), std::nullopt);                          // no stamp
  EXPECT_EQ(release_sample_ns(kReal, kReal - 1), std::nullopt);                  // clock stepped
  EXPECT_EQ(release_sample_ns(kReal, kReal + kMaxReleaseNs + 1), std::nullopt);  // preempted
}

TEST(Calibration, ReleaseIsTheProbesMedianSeededByTheConstant) {
  ReleaseCalibration r;
  EXPECT_FALSE(r.measured());
  EXPECT_EQ(r.release_ns(), kReleaseCostNs);
  for (int64_t v : {12, 30, 14, 16, 13}) EXPECT_TRUE(r.add(kReal, kReal + v * kUs));
  EXPECT_TRUE(r.measured());
  EXPECT_EQ(r.release_ns(), 14 * kUs);  // of 12 13 14 16 30
  EXPECT_EQ(r.p90_ns(), 30 * kUs);
  EXPECT_FALSE(r.add(kReal, kReal + 2 * kMs));  // not believed, not counted
  EXPECT_FALSE(r.add(kReal, 0));
  r.lose();
  EXPECT_EQ(r.release_ns(), 14 * kUs);
  EXPECT_EQ(r.probes(), 5u);
  EXPECT_EQ(r.rejected(), 2u);
  EXPECT_EQ(r.lost(), 1u);
  // The window is the last 32: a host that got slower moves the median within them.
  for (int i = 0; i < 32; ++i) r.add(kReal, kReal + 40 * kUs);
  EXPECT_EQ(r.release_ns(), 40 * kUs);
}

TEST(Calibration, LineTakesTheMeasuredReleaseForLaterPackets) {
  DelayLine line({10, Duration{250 * kUs}, Duration{0}, 1024}, 1, /*calibrated=*/true);
  ASSERT_TRUE(line.admit(1, 84, kMono, kReal - 30 * kUs, kReal));
  line.set_release_ns(17 * kUs);
  ASSERT_TRUE(line.admit(2, 84, kMono + kMs, kReal + kMs - 30 * kUs, kReal + kMs));
  EXPECT_EQ(line.calibration().release_ns(), 17 * kUs);
  // The first keeps the constant it was admitted with; the second leaves 17 µs before its delay.
  EXPECT_EQ(line.release_due(kMono - 30 * kUs + 999 + 250 * kUs - kReleaseCostNs), 1u);
  EXPECT_EQ(*line.next_deadline(), kMono + kMs - 30 * kUs + 999 + 250 * kUs - 17 * kUs);
  line.set_release_ns(-5);  // never negative
  EXPECT_EQ(line.calibration().release_ns(), 0);
}

TEST(WakeTimer, AdvanceIsTheOversleepP90PlusMarginBounded) {
  WakeTimer t({.max_advance_ns = 100 * kUs,
               .margin_ns = 2 * kUs,
               .spin_fraction = 0.05,
               .period_ns = 100 * kMs});
  EXPECT_EQ(t.advance_ns(0), 0);  // nothing measured yet: sleep to the deadline
  for (int i = 1; i <= 8; ++i) t.record_oversleep(i * 5 * kUs);  // 5..40 µs
  EXPECT_EQ(t.advance_ns(0), 40 * kUs + 2 * kUs);
  EXPECT_EQ(t.current_advance_ns(), 42 * kUs);
  for (int i = 0; i < 64; ++i) t.record_oversleep(3 * kMs);  // a stalled host
  EXPECT_EQ(t.advance_ns(0), 100 * kUs);                     // bounded
  WakeTimer off({.max_advance_ns = 0});
  off.record_oversleep(50 * kUs);
  EXPECT_EQ(off.advance_ns(0), 0);
  EXPECT_FALSE(off.enabled());
}

TEST(WakeTimer, SpinBudgetStopsSpinningUntilTheNextPeriod) {
  WakeTimer t(
      {.max_advance_ns = 100 * kUs, .margin_ns = 0, .spin_fraction = 0.05, .period_ns = 100 * kMs});
  t.record_oversleep(40 * kUs);
  EXPECT_EQ(t.advance_ns(1), 40 * kUs);
  // 5 ms of spinning in a 100 ms period is the whole budget.
  for (int i = 0; i < 124; ++i) t.record_spin(1 + i, 40 * kUs);
  EXPECT_EQ(t.advance_ns(200), 40 * kUs);  // 4.96 ms spent
  t.record_spin(300, 40 * kUs);
  EXPECT_EQ(t.advance_ns(400), 0);  // 5.0 ms: spent
  EXPECT_EQ(t.advance_ns(500), 0);
  EXPECT_EQ(t.budget_exhausted(), 1u);               // one period ran out, counted once
  EXPECT_EQ(t.advance_ns(1 + 100 * kMs), 40 * kUs);  // a new period
  EXPECT_EQ(t.spins(), 125u);
  EXPECT_EQ(t.spin_ns_total(), 125 * 40 * kUs);
}

TEST(StageStats, CalibrationFields) {
  std::map<uint16_t, DelayLine> lines;
  lines.emplace(10, DelayLine({10, Duration{kMs}, Duration{0}, 1024}, 1, true));
  lines.at(10).admit(1, 84, kMono, kReal - 30 * kUs, kReal);
  WakeTimer timer;
  timer.record_oversleep(40 * kUs);
  timer.advance_ns(0);
  timer.record_spin(0, 20 * kUs);
  ProcessStats p{42, 1.0, 0.001, 0.003, 0, ""};
  p.calibrated = true;
  p.timer = timer_stats(timer);
  auto j = stats_json(lines, {}, p);
  EXPECT_EQ(j["calibrated"], true);
  EXPECT_DOUBLE_EQ(j["timer"]["advance_us"].get<double>(), 42.0);
  EXPECT_DOUBLE_EQ(j["timer"]["oversleep_p90_us"].get<double>(), 40.0);
  EXPECT_NEAR(j["timer"]["spin_s"].get<double>(), 20e-6, 1e-12);
  EXPECT_EQ(j["timer"]["spins"], 1);
  const auto& q = j["queues"][0];
  EXPECT_DOUBLE_EQ(q["queue_latency_us"].get<double>(), 29.001);
  EXPECT_DOUBLE_EQ(q["release_us"].get<double>(), kReleaseCostNs / 1e3);
  EXPECT_NEAR(q["overhead_us"].get<double>(), 29.001 + kReleaseCostNs / 1e3, 1e-9);
  EXPECT_EQ(q["stamped"], 1);
  EXPECT_EQ(j["release"]["source"], "constant");
  EXPECT_DOUBLE_EQ(j["release"]["us"].get<double>(), kReleaseCostNs / 1e3);
  ReleaseCalibration release;
  for (int64_t v : {15, 18, 21}) release.add(kReal, kReal + v * kUs);
  p.release = release_stats(release, "");
  auto m = stats_json(lines, {}, p);
  EXPECT_EQ(m["release"]["source"], "probe");
  EXPECT_DOUBLE_EQ(m["release"]["us"].get<double>(), 18.0);
  EXPECT_EQ(m["release"]["probes"], 3);
  // Uncalibrated: the fields are there, and zero.
  std::map<uint16_t, DelayLine> plain;
  plain.emplace(11, DelayLine({11, Duration{kMs}, Duration{0}, 1024}, 1));
  auto k = stats_json(plain, {}, ProcessStats{});
  EXPECT_EQ(k["calibrated"], false);
  EXPECT_DOUBLE_EQ(k["queues"][0]["overhead_us"].get<double>(), 0.0);
}

}  // namespace
}  // namespace tb::stage
