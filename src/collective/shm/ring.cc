#include "collective/shm/ring.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace tb::collective::shm {

void futex_wake(uint32_t* word) {
  ::syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

size_t Ring::write(const std::byte* p, size_t n) {
  const uint64_t head = h_->head.load(std::memory_order_relaxed);  // only this side writes it
  const uint64_t tail = h_->tail.load(std::memory_order_acquire);
  const size_t room = cap_ - static_cast<size_t>(head - tail);
  n = std::min(n, room);
  if (n == 0) return 0;
  const size_t at = static_cast<size_t>(head % cap_);
  const size_t first = std::min(n, cap_ - at);
  std::memcpy(data_ + at, p, first);
  if (first < n) std::memcpy(data_, p + first, n - first);
  h_->head.store(head + n, std::memory_order_seq_cst);
  if (h_->consumer_sleeps.load(std::memory_order_seq_cst) != 0) futex_wake(word(h_->head));
  return n;
}

size_t Ring::read(std::byte* p, size_t n) {
  const uint64_t tail = h_->tail.load(std::memory_order_relaxed);  // only this side writes it
  const uint64_t head = h_->head.load(std::memory_order_acquire);
  n = std::min(n, static_cast<size_t>(head - tail));
  if (n == 0) return 0;
  const size_t at = static_cast<size_t>(tail % cap_);
  const size_t first = std::min(n, cap_ - at);
  std::memcpy(p, data_ + at, first);
  if (first < n) std::memcpy(p + first, data_, n - first);
  h_->tail.store(tail + n, std::memory_order_seq_cst);
  if (h_->producer_sleeps.load(std::memory_order_seq_cst) != 0) futex_wake(word(h_->tail));
  return n;
}

FutexWait Ring::producer_sleep() {
  h_->producer_sleeps.store(1, std::memory_order_seq_cst);
  const uint64_t tail = h_->tail.load(std::memory_order_seq_cst);
  const uint64_t head = h_->head.load(std::memory_order_relaxed);
  if (head - tail < cap_) {  // room appeared: do not sleep
    h_->producer_sleeps.store(0, std::memory_order_relaxed);
    return {};
  }
  return {word(h_->tail), static_cast<uint32_t>(tail)};
}

void Ring::producer_awake() {
  h_->producer_sleeps.store(0, std::memory_order_relaxed);
}

FutexWait Ring::consumer_sleep() {
  h_->consumer_sleeps.store(1, std::memory_order_seq_cst);
  const uint64_t head = h_->head.load(std::memory_order_seq_cst);
  const uint64_t tail = h_->tail.load(std::memory_order_relaxed);
  if (head != tail) {  // bytes arrived: do not sleep
    h_->consumer_sleeps.store(0, std::memory_order_relaxed);
    return {};
  }
  return {word(h_->head), static_cast<uint32_t>(head)};
}

void Ring::consumer_awake() {
  h_->consumer_sleeps.store(0, std::memory_order_relaxed);
}

void Ring::wake_all() {
  futex_wake(word(h_->head));
  futex_wake(word(h_->tail));
}

}  // namespace tb::collective::shm
