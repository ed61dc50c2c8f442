// Calibration: what the delay stage measures of its own cost, and the arithmetic that takes that
// cost out of the configured delay, so a packet leaves at arrival + delay, not delay + overhead.
//
// Where the overhead comes from (measured on the reference VM, 2 vCPU, SCHED_FIFO, ICMP echo
// through a stage with the kernel's receive stamps): a packet waits in the kernel from its
// arrival (netif_rx on the veth) until the stage has read its notice — the stage's wake-up from
// ppoll, median 25-35 µs idle, 55-75 µs p90, more while a burst is being drained; the stage's
// timer then woke 25-75 µs (p10-p90) after the deadline; and the verdict itself costs ~10-17 µs
// more than the unshaped path. Before calibration all of it was added to every packet: a
// 0.1 ms stage delayed 0.155-0.18 ms.
//  - Queue latency, per queue: the kernel stamps every packet it receives while any socket has
//    asked for receive timestamps (netstamp_needed; the stage holds one such socket,
//    stage.h) and nfnetlink_queue passes the stamp on (NFQA_TIMESTAMP, CLOCK_REALTIME,
//    microseconds). A packet's deadline counts from that stamp, so its own wait in the kernel is
//    taken out exactly. A packet without a plausible stamp (a locally generated one: the kernel
//    stamps only what it receives) counts from its receive time minus an estimate of that wait
//    (UnstampedWait below).
//  - Release cost: what remains between deciding a packet is due and the kernel passing it on
//    (the verdict's system call, nf_reinject, the rest of the hook and the transmit up to the
//    next receiver's netif_rx, where that receiver's stamp is taken). Each stage measures its own,
//    at start and every kProbeIntervalNs while it runs (ReleaseCalibration): it sends itself a
//    UDP probe over its namespace's loopback, marked kProbeMark, which one iptables rule of its
//    own (netfilter_rules.h add_probe_rule: POSTROUTING -o lo, that mark only) queues to
//    kProbeQueue; the stage accepts it alone in one verdict, noting CLOCK_REALTIME just before
//    the send, and reads the probe's kernel receive stamp (SO_TIMESTAMPNS: loopback_xmit clears
//    the stamp and netif_rx takes a new one) — stamp - send time is one release. The path is
//    the egress one (POSTROUTING, a transmit, netif_rx); a forwarded packet also passes a route
//    lookup and the FORWARD hook (~1-2 µs more), so the probe's median is if anything a little
//    short and packets leave a little late, not early. kReleaseCostNs is the seed until the
//    first probe, and the fallback where a probe cannot run (no loopback, no iptables): the
//    stats file says which ("release": "source").
//  - Timer lateness: WakeTimer wakes the stage early by a high quantile of its recent
//    oversleeps (seeded by a few timed sleeps at start) and busy-waits the rest, within a CPU
//    budget.
// The deadline is arrival + delay - release cost, never before the arrival; the rest of the
// overhead is gone because the arrival is the kernel's and the wake-up is early.
// Pure: every time is passed in; not thread-safe (owned by the stage's single loop).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace tb::stage {

// What remains of the stage's cost per packet once the queue latency is taken from the kernel's
// stamp and the timer from WakeTimer: from the stage's decision through the verdict's sendmsg,
// nfnetlink and the reinjection, with the kernel's code cold after the stage slept. Measured on
// the reference VM (2 vCPU Firecracker, 6.18; ICMP echo through a stage at 0.1/1/10 ms, the
// release's CLOCK_REALTIME against the reply's receive stamp, medians of 400): 15-21 µs, of
// which the unshaped path's own echo processing is ~4 µs (its minimum RTT) — so ~11-17 µs;
// 10 µs keeps the rare fast release from leaving early.
inline constexpr int64_t kReleaseCostNs = 10'000;
// The release probe (ReleaseCalibration): the NFQUEUE number the stage binds for it in its own
// namespace (a lab's queues are numbered from 1 per namespace, plan/shaping.cc, so this one is
// never a link's), the fwmark on its probes (only they match the probe rule), how often it
// probes while running, how many probes it sends at start, and the largest release it
// believes: a longer one was a preemption or a clock step, not the path's cost.
inline constexpr uint16_t kProbeQueue = 65535;
inline constexpr uint32_t kProbeMark = 0x74620001;  // "tb" 0001
// The release probe rule's comment (netfilter_rules.h): one rule per namespace.
inline constexpr const char* kProbeMarker = "tb-delayd release probe";
inline constexpr int64_t kProbeIntervalNs = 200'000'000;
inline constexpr int kStartProbes = 16;
inline constexpr int64_t kMaxReleaseNs = 1'000'000;
// Stamps older than this are not believed: a stale stamp from an earlier hop would release the
// packet early. The stage's own stall under overload is far shorter than this.
inline constexpr int64_t kMaxStampAgeNs = 1'000'000'000;

// The last `size` samples of a quantity, and one quantile of them (recomputed every `every`
// samples, so adding is O(1) amortised). Empty: no value.
class SampleWindow {
 public:
  SampleWindow(double quantile, size_t size, size_t every);
  void add(int64_t v);
  std::optional<int64_t> value() const { return value_; }
  uint64_t count() const { return count_; }

 private:
  void recompute();
  double quantile_;
  size_t every_;
  std::vector<int64_t> ring_;
  uint64_t count_ = 0;
  std::optional<int64_t> value_;
  std::vector<int64_t> scratch_;
};

// How long the kernel held a packet before the stage read it: now - its stamp, rounded so it is
// never overestimated (the stamp has µs resolution). Nothing without a stamp (0) or when the
// stamp is not a plausible CLOCK_REALTIME receive time (in the future, older than
// kMaxStampAgeNs: another clock, or stale).
std::optional<int64_t> stamp_age_ns(int64_t stamp_ns, int64_t now_real_ns);

// A deadline: arrival + the sampled delay less the release cost, never before the arrival.
int64_t release_deadline(int64_t arrival_ns, int64_t delay_ns, int64_t release_cost_ns);

// What the stage knows, when it reads a packet without a stamp, about how long that packet
// waited in the kernel. The estimate is the queue's own median of stamped waits when it has
// any; else the stage's wake-up latency (`wake_ns`: the median time a timed wait returned late,
// the same wake-up a packet's notice causes; a server's egress queue sees only its own,
// unstamped, packets); and never more than `since_empty_ns`, the time since the stage last
// found its socket empty — the packet arrived after that. Without it, a server's egress paid
// the stage's whole wake-up (25-35 us on the reference machine, more on a slower one) on top
// of its delay.
struct UnstampedWait {
  std::optional<int64_t> wake_ns;
  int64_t since_empty_ns = INT64_MAX;
};

// One release, from a probe: the verdict's send began at `sent_real_ns` and the probe was
// stamped by the kernel at `stamp_real_ns` (both CLOCK_REALTIME, ns). Nothing when it is not
// plausible: no stamp, a stamp before the send (the clock stepped), or longer than
// kMaxReleaseNs.
std::optional<int64_t> release_sample_ns(int64_t sent_real_ns, int64_t stamp_real_ns);

// The stage's release cost: the median of its last 32 probes (recomputed at each), or
// kReleaseCostNs before the first. The median, not a low quantile: the probe's path is the
// shorter one (calibration above), so its median does not make a forwarded packet early.
class ReleaseCalibration {
 public:
  ReleaseCalibration();
  // Adds one probe (release_sample_ns); false when it was not believed (counted in rejected()).
  bool add(int64_t sent_real_ns, int64_t stamp_real_ns);
  // A probe whose verdict or receipt never came (counted in lost()).
  void lose() { ++lost_; }
  int64_t release_ns() const { return median_.value().value_or(kReleaseCostNs); }
  bool measured() const { return median_.value().has_value(); }
  std::optional<int64_t> p90_ns() const { return p90_.value(); }
  uint64_t probes() const { return median_.count(); }
  uint64_t rejected() const { return rejected_; }
  uint64_t lost() const { return lost_; }

 private:
  SampleWindow median_;
  SampleWindow p90_;
  uint64_t rejected_ = 0;
  uint64_t lost_ = 0;
};

// One queue's calibration: its arrival times and its queue latency.
class QueueCalibration {
 public:
  QueueCalibration();
  // The arrival on the stage's clock (CLOCK_MONOTONIC) of a packet read at now_mono_ns /
  // now_real_ns with kernel stamp `stamp_ns` (0 = none). A stamped packet also updates the
  // queue's latency window; an unstamped one counts from the estimate `unstamped` gives.
  int64_t arrival_ns(int64_t stamp_ns, int64_t now_real_ns, int64_t now_mono_ns,
                     const UnstampedWait& unstamped = {});
  // Median of recent stamped queue latencies; for a queue with none, the wake-up latency the
  // last unstamped packet was given (0 before either).
  int64_t queue_ns() const { return latency_.value().value_or(unstamped_wait_); }
  // The stage's release cost (ReleaseCalibration), which it sets on every queue after each
  // probe; kReleaseCostNs until then.
  int64_t release_ns() const { return release_ns_; }
  void set_release_ns(int64_t ns) { release_ns_ = std::max<int64_t>(ns, 0); }
  // Queue latency + release cost: what an uncalibrated stage added to every packet.
  int64_t overhead_ns() const { return queue_ns() + release_ns(); }
  uint64_t stamped() const { return stamped_; }
  uint64_t unstamped() const { return unstamped_; }

 private:
  SampleWindow latency_;
  uint64_t stamped_ = 0;
  uint64_t unstamped_ = 0;
  int64_t unstamped_wait_ = 0;
  int64_t release_ns_ = kReleaseCostNs;
};

// The stage's timer: how long before a deadline to stop sleeping and busy-wait. The advance is
// a high quantile (p90) of recent oversleeps (how late a timed ppoll returned) plus a margin,
// at most max_advance; it is 0 (sleep to the deadline, no spin) while the spin time in the
// current budget period exceeds spin_fraction of it, so dense traffic cannot turn the stage
// into a busy loop.
struct WakeTimerConfig {
  int64_t max_advance_ns = 100'000;
  int64_t margin_ns = 2'000;
  double spin_fraction = 0.05;  // of one core
  int64_t period_ns = 100'000'000;
};
class WakeTimer {
 public:
  explicit WakeTimer(WakeTimerConfig config = {});
  void record_oversleep(int64_t ns);
  // 0 when spinning is off (budget spent, or no oversleep measured yet).
  int64_t advance_ns(int64_t now_ns);
  void record_spin(int64_t now_ns, int64_t spun_ns);
  // Totals for the stats file.
  int64_t spin_ns_total() const { return spin_total_; }
  uint64_t spins() const { return spins_; }
  uint64_t budget_exhausted() const { return exhausted_; }  // periods that ran out
  std::optional<int64_t> oversleep_p90() const { return oversleep_.value(); }
  // The median oversleep: how long the stage takes to run once the event it waited for came.
  std::optional<int64_t> wake_latency() const { return oversleep_median_.value(); }
  // The advance as of the last advance_ns() call (for the stats file).
  int64_t current_advance_ns() const { return last_advance_; }
  bool enabled() const { return config_.max_advance_ns > 0; }

 private:
  void roll(int64_t now_ns);
  int64_t compute_advance(int64_t now_ns);
  WakeTimerConfig config_;
  SampleWindow oversleep_;
  SampleWindow oversleep_median_;
  int64_t period_start_ = 0;
  int64_t period_spin_ = 0;
  bool period_exhausted_ = false;
  int64_t spin_total_ = 0;
  uint64_t spins_ = 0;
  uint64_t exhausted_ = 0;
  int64_t last_advance_ = 0;
};

}  // namespace tb::stage
