// The delay stage's calibration arithmetic (calibration.h).
#include "stage/calibration.h"

#include <algorithm>
#include <cmath>

namespace tb::stage {

SampleWindow::SampleWindow(double quantile, size_t size, size_t every)
    : quantile_(quantile), every_(std::max<size_t>(every, 1)), ring_(std::max<size_t>(size, 1)) {}

void SampleWindow::add(int64_t v) {
  ring_[count_ % ring_.size()] = v;
  ++count_;
  // Early on every sample counts; later every `every_`th.
  if (count_ <= every_ || count_ % every_ == 0) recompute();
}

void SampleWindow::recompute() {
  size_t n = static_cast<size_t>(std::min<uint64_t>(count_, ring_.size()));
  scratch_.assign(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(n));
  size_t k = std::min(n - 1, static_cast<size_t>(std::floor(quantile_ * static_cast<double>(n))));
  std::nth_element(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(k),
                   scratch_.end());
  value_ = scratch_[k];
}

std::optional<int64_t> stamp_age_ns(int64_t stamp_ns, int64_t now_real_ns) {
  if (stamp_ns <= 0) return std::nullopt;
  // The stamp is truncated to whole µs: the packet arrived up to 999 ns after it, so the age
  // is taken 999 ns shorter — a deadline may be up to 1 µs late, never early.
  int64_t age = now_real_ns - stamp_ns - 999;
  if (age < -999 || age > kMaxStampAgeNs) return std::nullopt;
  return std::max<int64_t>(age, 0);
}

int64_t release_deadline(int64_t arrival_ns, int64_t delay_ns, int64_t release_cost_ns) {
  return arrival_ns + std::max<int64_t>(0, delay_ns - release_cost_ns);
}

std::optional<int64_t> release_sample_ns(int64_t sent_real_ns, int64_t stamp_real_ns) {
  if (stamp_real_ns <= 0) return std::nullopt;
  const int64_t release = stamp_real_ns - sent_real_ns;
  if (release < 0 || release > kMaxReleaseNs) return std::nullopt;
  return release;
}

// 32 probes: at one per kProbeIntervalNs the window spans the last ~6 s (the start's 16 probes
// fill half of it at once); recomputed at every probe, which is rare.
ReleaseCalibration::ReleaseCalibration() : median_(0.5, 32, 1), p90_(0.9, 32, 1) {}

bool ReleaseCalibration::add(int64_t sent_real_ns, int64_t stamp_real_ns) {
  auto release = release_sample_ns(sent_real_ns, stamp_real_ns);
  if (!release) {
    ++rejected_;
    return false;
  }
  median_.add(*release);
  p90_.add(*release);
  return true;
}

// 64 samples: the median follows a change in the host's load within a few dozen packets; the
// window is recomputed every 8 (nth_element over 64 values, well under a µs per packet).
QueueCalibration::QueueCalibration() : latency_(0.5, 64, 8) {}

int64_t QueueCalibration::arrival_ns(int64_t stamp_ns, int64_t now_real_ns, int64_t now_mono_ns,
                                     const UnstampedWait& unstamped) {
  if (auto age = stamp_age_ns(stamp_ns, now_real_ns)) {
    ++stamped_;
    latency_.add(*age);
    return now_mono_ns - *age;
  }
  ++unstamped_;
  int64_t wait = 0;
  if (auto own = latency_.value()) {
    wait = *own;
  } else {
    unstamped_wait_ = unstamped.wake_ns.value_or(0);
    wait = unstamped_wait_;
  }
  return now_mono_ns - std::clamp<int64_t>(wait, 0, std::max<int64_t>(unstamped.since_empty_ns, 0));
}

WakeTimer::WakeTimer(WakeTimerConfig config)
    : config_(config), oversleep_(0.9, 64, 8), oversleep_median_(0.5, 64, 8) {}

void WakeTimer::record_oversleep(int64_t ns) {
  oversleep_.add(std::max<int64_t>(ns, 0));
  oversleep_median_.add(std::max<int64_t>(ns, 0));
}

void WakeTimer::roll(int64_t now_ns) {
  if (now_ns - period_start_ < config_.period_ns) return;
  period_start_ = now_ns;
  period_spin_ = 0;
  period_exhausted_ = false;
}

int64_t WakeTimer::advance_ns(int64_t now_ns) {
  last_advance_ = compute_advance(now_ns);
  return last_advance_;
}

int64_t WakeTimer::compute_advance(int64_t now_ns) {
  if (config_.max_advance_ns <= 0) return 0;
  roll(now_ns);
  if (period_spin_ >=
      static_cast<int64_t>(config_.spin_fraction * static_cast<double>(config_.period_ns))) {
    if (!period_exhausted_) ++exhausted_;
    period_exhausted_ = true;
    return 0;
  }
  auto p90 = oversleep_.value();
  if (!p90) return 0;
  return std::min(config_.max_advance_ns, *p90 + config_.margin_ns);
}

void WakeTimer::record_spin(int64_t now_ns, int64_t spun_ns) {
  roll(now_ns);
  period_spin_ += spun_ns;
  spin_total_ += spun_ns;
  ++spins_;
}

}  // namespace tb::stage
