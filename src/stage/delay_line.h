// DelayLine: the held packets of one delay-stage queue and the arithmetic of when each may go.
//
// A FIFO of (packet id, length, deadline). Each packet gets deadline = arrival + delay + a normal
// sample of the jitter, but never earlier than the packet before it: deadlines are kept monotonic,
// so packets leave in the order they came (no reordering) and the kernel's ids stay in order too,
// which is what lets one NFQNL_MSG_VERDICT_BATCH release a whole prefix. Jitter is therefore
// one-sided once it exceeds the packet spacing: a late packet delays those behind it.
//
// Calibrated (the stage's default, calibration.h): the arrival is the kernel's receive stamp
// (or the receive time less an estimate of the packet's wait, UnstampedWait) and the deadline is
// the delay less the release cost after it, never before the arrival. Uncalibrated (tb-delayd
// --uncalibrated, and the tests of the bare arithmetic): the arrival is the time the stage read the
// packet.
//
// No system calls: time is passed in, so the whole thing is unit-tested. Reconfiguring changes
// what later packets get; packets already held keep their deadlines (a cut from 20 ms to 10 ms
// takes effect over one old delay). Storage grows on demand up to maxlen slots.
// Not thread-safe; owned by the stage's single loop.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "stage/calibration.h"
#include "stage/queue_spec.h"

namespace tb::stage {

struct LineCounters {
  uint64_t packets = 0;      // admitted
  uint64_t bytes = 0;        // their original lengths (a GSO super-packet counts whole)
  uint64_t released = 0;     // released at or after their deadline
  uint64_t late_ns_sum = 0;  // sum of (release time - deadline) over `released`
  uint64_t late_ns_max = 0;
  uint64_t drops_full = 0;  // refused because maxlen packets were held (the caller drops them)
  uint64_t flushed = 0;     // released early by release_all (shutdown, queue removed)
  uint32_t held_max = 0;
};

class DelayLine {
 public:
  DelayLine(const QueueSpec& spec, uint64_t seed, bool calibrated = false);

  const QueueSpec& spec() const { return spec_; }
  // New delay, jitter and maxlen for packets admitted from now on. The queue number must match.
  void reconfigure(const QueueSpec& spec);

  // Takes a packet the stage read at `now_ns` (CLOCK_MONOTONIC), with kernel stamp `stamp_ns`
  // (0 = none) read at `now_real_ns` (CLOCK_REALTIME); both are used only when calibrated.
  // False when maxlen packets are already held.
  // `unstamped` is what the stage knows of an unstamped packet's wait (calibration.h).
  bool admit(uint32_t id, uint32_t len, int64_t now_ns, int64_t stamp_ns = 0,
             int64_t now_real_ns = 0, const UnstampedWait& unstamped = {});
  // Removes every packet whose deadline is <= now_ns and returns the id of the last one (the id
  // for a batch verdict), or nothing when none was due.
  std::optional<uint32_t> release_due(int64_t now_ns);
  // Removes every held packet regardless of deadline; returns the last id, if any.
  std::optional<uint32_t> release_all();

  // Id of the oldest held packet (the first one release_due would release).
  std::optional<uint32_t> front_id() const {
    if (head_ == tail_) return std::nullopt;
    return at(head_).id;
  }
  // Deadline of the oldest held packet.
  std::optional<int64_t> next_deadline() const;
  uint32_t held() const { return static_cast<uint32_t>(tail_ - head_); }
  const LineCounters& counters() const { return counters_; }
  bool calibrated() const { return calibrated_; }
  const QueueCalibration& calibration() const { return calibration_; }
  // The stage's measured release cost (ReleaseCalibration) for packets admitted from now on.
  void set_release_ns(int64_t ns) { calibration_.set_release_ns(ns); }

 private:
  struct Slot {
    uint32_t id;
    uint32_t len;
    int64_t deadline_ns;
  };
  Slot& at(uint64_t i) { return ring_[i & (ring_.size() - 1)]; }
  const Slot& at(uint64_t i) const { return ring_[i & (ring_.size() - 1)]; }
  void grow();
  int64_t sample_delay_ns();

  QueueSpec spec_;
  std::vector<Slot> ring_;  // power-of-two size
  uint64_t head_ = 0, tail_ = 0;
  int64_t last_deadline_ns_ = 0;
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_{0.0, 1.0};
  LineCounters counters_;
  bool calibrated_;
  QueueCalibration calibration_;
};

}  // namespace tb::stage
