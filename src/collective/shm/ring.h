// ShmRing: a single-producer/single-consumer byte ring in memory that two processes (or two
// threads) share, the data path of ShmComm (collective/shm/shm.h).
//
// The shared part is a RingHeader (the producer's and the consumer's counters, each on its own
// cache line) followed by `capacity` data bytes. `head` counts the bytes ever written, `tail`
// the bytes ever read; head - tail bytes are unread and sit at [tail % capacity, ...) wrapping
// at the end. The producer copies bytes in and then publishes head (release); the consumer
// reads head (acquire), copies bytes out and then publishes tail (release), so neither side
// ever reads what the other is still writing. Any capacity works (odd ones too).
//
// Sleeping: a side that cannot move sets its "sleeps" flag, looks at the other side's counter
// once more, and only then waits on that counter's low 32 bits as a futex (shared, not private:
// the mapping is shared between processes). The other side publishes its counter and then
// looks at the flag (both sequentially consistent, so one of them sees the other) and wakes
// the futex only when the flag is set: no system call while both are busy. The caller does the
// waiting (ShmComm waits on several rings at once with futex_waitv); the ring gives the word and
// the value to wait for.
//
// One producer thread and one consumer thread per ring; the header's own fields are atomics.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tb::collective::shm {

struct RingHeader {
  alignas(64) std::atomic<uint64_t> head;             // bytes written, ever (producer)
  alignas(64) std::atomic<uint64_t> tail;             // bytes read, ever (consumer)
  alignas(64) std::atomic<uint32_t> consumer_sleeps;  // 1: the consumer waits on head
  alignas(64) std::atomic<uint32_t> producer_sleeps;  // 1: the producer waits on tail
};
static_assert(sizeof(RingHeader) == 256);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// A futex word and the value a waiter saw in it (it sleeps while the word still holds it).
struct FutexWait {
  uint32_t* word = nullptr;
  uint32_t value = 0;
};

class Ring {
 public:
  Ring() = default;
  // `h` and `data` (capacity bytes) in shared memory, zero-filled before either side uses them.
  Ring(RingHeader* h, std::byte* data, size_t capacity) : h_(h), data_(data), cap_(capacity) {}

  size_t capacity() const { return cap_; }
  // Producer: copies up to n bytes from p into the ring, publishes them, wakes a sleeping
  // consumer; returns how many (0: the ring is full).
  size_t write(const std::byte* p, size_t n);
  // Consumer: copies up to n unread bytes into p, frees their room, wakes a sleeping producer;
  // returns how many (0: the ring is empty).
  size_t read(std::byte* p, size_t n);

  // Producer about to sleep for room: sets its flag and returns the futex to wait on, or
  // nullopt-like {nullptr} when room appeared meanwhile (then it must not sleep).
  FutexWait producer_sleep();
  void producer_awake();
  // Consumer about to sleep for bytes: as above.
  FutexWait consumer_sleep();
  void consumer_awake();

  // Wakes whoever sleeps on either counter (a side that fails or closes).
  void wake_all();

  // The futex word of a 64-bit counter: its low 32 bits (little-endian).
  static uint32_t* word(std::atomic<uint64_t>& counter) {
    return reinterpret_cast<uint32_t*>(&counter);
  }

 private:
  RingHeader* h_ = nullptr;
  std::byte* data_ = nullptr;
  size_t cap_ = 0;
};

// FUTEX_WAKE on a shared word (every waiter).
void futex_wake(uint32_t* word);

}  // namespace tb::collective::shm
