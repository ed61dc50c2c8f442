// DelayLine (delay_line.h).
#include "stage/delay_line.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace tb::stage {
namespace {
constexpr size_t kInitialSlots = 4096;
}

DelayLine::DelayLine(const QueueSpec& spec, uint64_t seed, bool calibrated)
    : spec_(spec), rng_(seed), calibrated_(calibrated) {
  ring_.resize(std::bit_ceil(std::min<size_t>(spec.maxlen, kInitialSlots)));
}

void DelayLine::reconfigure(const QueueSpec& spec) {
  TB_CHECK(spec.num == spec_.num);
  spec_ = spec;
}

int64_t DelayLine::sample_delay_ns() {
  if (spec_.jitter.ns <= 0) return spec_.delay.ns;
  double d =
      static_cast<double>(spec_.delay.ns) + normal_(rng_) * static_cast<double>(spec_.jitter.ns);
  // Clamp to [0, delay + 4 sigma]: never negative, and a rare far tail cannot stall the queue.
  double hi = static_cast<double>(spec_.delay.ns) + 4.0 * static_cast<double>(spec_.jitter.ns);
  return static_cast<int64_t>(std::clamp(d, 0.0, hi));
}

void DelayLine::grow() {
  std::vector<Slot> bigger(ring_.size() * 2);
  for (uint64_t i = head_; i != tail_; ++i) bigger[i - head_] = at(i);
  tail_ -= head_;
  head_ = 0;
  ring_ = std::move(bigger);
}

bool DelayLine::admit(uint32_t id, uint32_t len, int64_t now_ns, int64_t stamp_ns,
                      int64_t now_real_ns, const UnstampedWait& unstamped) {
  if (held() >= spec_.maxlen) {
    ++counters_.drops_full;
    return false;
  }
  if (tail_ - head_ == ring_.size()) grow();
  int64_t deadline =
      calibrated_
          ? release_deadline(calibration_.arrival_ns(stamp_ns, now_real_ns, now_ns, unstamped),
                             sample_delay_ns(), calibration_.release_ns())
          : now_ns + sample_delay_ns();
  deadline = std::max(deadline, last_deadline_ns_);
  last_deadline_ns_ = deadline;
  at(tail_++) = Slot{id, len, deadline};
  ++counters_.packets;
  counters_.bytes += len;
  counters_.held_max = std::max(counters_.held_max, held());
  return true;
}

std::optional<uint32_t> DelayLine::release_due(int64_t now_ns) {
  std::optional<uint32_t> last;
  while (head_ != tail_ && at(head_).deadline_ns <= now_ns) {
    const Slot& s = at(head_++);
    uint64_t late = static_cast<uint64_t>(now_ns - s.deadline_ns);
    counters_.late_ns_sum += late;
    counters_.late_ns_max = std::max(counters_.late_ns_max, late);
    ++counters_.released;
    last = s.id;
  }
  return last;
}

std::optional<uint32_t> DelayLine::release_all() {
  std::optional<uint32_t> last;
  if (head_ != tail_) last = at(tail_ - 1).id;
  counters_.flushed += tail_ - head_;
  head_ = tail_;
  return last;
}

std::optional<int64_t> DelayLine::next_deadline() const {
  if (head_ == tail_) return std::nullopt;
  return at(head_).deadline_ns;
}

}  // namespace tb::stage
