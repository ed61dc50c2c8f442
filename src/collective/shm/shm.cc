#include "collective/shm/shm.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <thread>

#include "core/safe_file.h"

namespace tb::collective {
namespace shm {

// The segment's first page: per side (0 = the lower rank) its pid and flags, then the two rings'
// headers (ring 0 carries lower -> higher, ring 1 higher -> lower); the data follows page-aligned.
struct SegHeader {
  alignas(64) std::atomic<uint32_t> attached[2];
  alignas(64) std::atomic<uint32_t> closed[2];
  alignas(64) std::atomic<int32_t> pid[2];
  alignas(64) std::atomic<uint32_t> magic;
  std::atomic<uint64_t> ring_bytes;
  alignas(64) RingHeader ring[2];
};

}  // namespace shm

namespace {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC: the progress board's clock
using shm::FutexWait;
using shm::Ring;
using shm::RingHeader;
using shm::SegHeader;

constexpr uint32_t kMagic = 0x74627368;  // "tbsh"
constexpr size_t kPage = 4096;
// A sender publishes at most this many bytes at a time, so the receiver copies out while the
// sender copies in (on a machine with a core to spare) and wakes a sleeping receiver early.
constexpr size_t kPiece = 256 * 1024;

static_assert(sizeof(SegHeader) <= kPage);

size_t round_up(size_t n) {
  return (n + kPage - 1) / kPage * kPage;
}

timespec to_timespec(Clock::time_point t) {
  const auto ns = mono_ns(t);
  return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

void wake(std::atomic<uint32_t>& w) {
  shm::futex_wake(reinterpret_cast<uint32_t*>(&w));
}

// Sleeps until one of `waits` no longer holds its value, or `until` (CLOCK_MONOTONIC). Errors
// (a value that changed already, a timeout, a signal) just end the wait: the caller looks again.
void wait_any(const std::vector<FutexWait>& waits, Clock::time_point until) {
#ifdef SYS_futex_waitv
  static std::atomic<bool> no_waitv{false};
  if (!no_waitv.load(std::memory_order_relaxed)) {
    std::vector<futex_waitv> v(waits.size());
    for (size_t i = 0; i < waits.size(); ++i)
      v[i] = futex_waitv{waits[i].value, reinterpret_cast<uint64_t>(waits[i].word), FUTEX_32, 0};
    const timespec ts = to_timespec(until);
    if (::syscall(SYS_futex_waitv, v.data(), static_cast<unsigned>(v.size()), 0, &ts,
                  CLOCK_MONOTONIC) >= 0 ||
        errno != ENOSYS)
      return;
    no_waitv.store(true, std::memory_order_relaxed);  // a kernel before 5.16
  }
#endif
  // One word at a time, a millisecond at most each, so the others are looked at too.
  const auto left = std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(1));
  if (left <= Clock::duration::zero()) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
  const timespec rel{0, static_cast<long>(ns)};
  ::syscall(SYS_futex, waits.front().word, FUTEX_WAIT, waits.front().value, &rel, nullptr, 0);
}

}  // namespace

struct ShmComm::Segment {
  int peer = 0, side = 0;  // side 0: this rank is the lower of the pair
  std::string path;
  void* map = MAP_FAILED;
  size_t bytes = 0;
  SegHeader* h = nullptr;
  Ring out, in;
  UniqueFd pidfd;  // the peer's process, readable once it exited
  ~Segment() {
    if (map != MAP_FAILED) ::munmap(map, bytes);
  }
  int other() const { return 1 - side; }
};

ShmComm::ShmComm(const ShmOptions& o, std::unique_ptr<Comm> inner)
    : Comm(o.rank, o.size), o_(o), seg_(static_cast<size_t>(o.size)), inner_(std::move(inner)) {}

ShmComm::~ShmComm() {
  // Gone is closed: a peer still waiting on this rank fails now, not at its timeout.
  for (const auto& s : seg_)
    if (s) {
      s->h->closed[s->side].store(1, std::memory_order_seq_cst);
      s->out.wake_all();
      s->in.wake_all();
    }
}

Result<std::unique_ptr<ShmComm>> ShmComm::connect(const ShmOptions& o,
                                                  std::unique_ptr<Comm> inner) {
  const std::string me = "rank " + std::to_string(o.rank);
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size || static_cast<int>(o.shm.size()) != o.size)
    return bad_input("shm: rank " + std::to_string(o.rank) + " of " + std::to_string(o.size) +
                     " needs one shm flag per rank");
  if (!kShmRingBytesRange.contains(static_cast<int64_t>(o.ring_bytes)))
    return bad_input("shm: ring of " + std::to_string(o.ring_bytes) + " bytes is not " +
                     kShmRingBytesRange.text());
  if (o.timeout.count() < 1) return bad_input("--timeout: must be positive");
  if (inner && (inner->rank() != o.rank || inner->size() != o.size))
    return bad_input("shm: the inner communicator is rank " + std::to_string(inner->rank()) +
                     " of " + std::to_string(inner->size()));
  std::unique_ptr<ShmComm> c(new ShmComm(o, std::move(inner)));
  for (int j = 0; j < o.size; ++j)
    if (j != o.rank && o.shm[static_cast<size_t>(j)]) c->shm_peers_.push_back(j);
  if (!c->inner_)
    for (int j = 0; j < o.size; ++j)
      if (j != o.rank && !o.shm[static_cast<size_t>(j)])
        return bad_input("shm: " + me + " has no inner communicator for rank " + std::to_string(j) +
                         ", which is not on its server");
  auto board = ProgressBoard::open(o.board_path, o.rank, o.size);
  if (!board) return std::unexpected(with_context(board.error(), me));
  c->board_ = std::move(*board);

  const auto deadline = Clock::now() + o.timeout;
  const size_t data = round_up(o.ring_bytes);
  const size_t bytes = kPage + 2 * data;
  for (int j : c->shm_peers_) {
    auto s = std::make_unique<Segment>();
    s->peer = j;
    s->side = o.rank < j ? 0 : 1;
    s->path =
        o.prefix + std::to_string(std::min(o.rank, j)) + "-" + std::to_string(std::max(o.rank, j));
    const std::string what =
        me + ": shared memory with rank " + std::to_string(j) + " (" + s->path + ")";
    auto fd = open_file(s->path, O_RDWR | O_CREAT, 0600);
    if (!fd) return std::unexpected(with_context(fd.error(), what));
    struct stat st {};
    if (::fstat(fd->get(), &st) != 0) return sys_fail(what + ": fstat");
    if (st.st_uid != ::geteuid())
      return fail(what + ": owned by uid " + std::to_string(st.st_uid) + ", not this user");
    // Both sides size it the same; a new file is zero-filled, which is the rings' empty state.
    if (::ftruncate(fd->get(), static_cast<off_t>(bytes)) != 0)
      return sys_fail(what + ": ftruncate");
    s->map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
    if (s->map == MAP_FAILED) return sys_fail(what + ": mmap");
    s->bytes = bytes;
    s->h = static_cast<SegHeader*>(s->map);
    auto* base = static_cast<std::byte*>(s->map);
    Ring r0(&s->h->ring[0], base + kPage, o.ring_bytes);
    Ring r1(&s->h->ring[1], base + kPage + data, o.ring_bytes);
    s->out = s->side == 0 ? r0 : r1;
    s->in = s->side == 0 ? r1 : r0;
    s->h->magic.store(kMagic, std::memory_order_relaxed);
    s->h->ring_bytes.store(o.ring_bytes, std::memory_order_relaxed);
    s->h->pid[s->side].store(static_cast<int32_t>(::getpid()), std::memory_order_relaxed);
    s->h->attached[s->side].store(1, std::memory_order_seq_cst);
    wake(s->h->attached[s->side]);
    c->seg_[static_cast<size_t>(j)] = std::move(s);
  }
  // Wait for every peer to attach; then the name can go (both hold the mapping).
  for (int j : c->shm_peers_) {
    Segment& s = *c->seg_[static_cast<size_t>(j)];
    auto& theirs = s.h->attached[s.other()];
    while (theirs.load(std::memory_order_seq_cst) == 0) {
      const auto now = Clock::now();
      if (now >= deadline)
        return fail(me + ": timed out after " + std::to_string(o.timeout.count()) +
                    " ms waiting for rank " + std::to_string(j) + " to attach " + s.path +
                    " (did every rank start, with --intra-server shm?)");
      wait_any({FutexWait{reinterpret_cast<uint32_t*>(&theirs), 0}},
               std::min(deadline, now + kPeerCheck));
    }
    if (s.h->ring_bytes.load() != o.ring_bytes || s.h->magic.load() != kMagic)
      return fail(me + ": " + s.path + " holds rings of " + std::to_string(s.h->ring_bytes.load()) +
                  " bytes, this rank uses " + std::to_string(o.ring_bytes));
    if (::unlink(s.path.c_str()) != 0 && errno != ENOENT)
      return sys_fail(me + ": unlink " + s.path);
    const int pid = s.h->pid[s.other()].load(std::memory_order_relaxed);
    s.pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!s.pidfd)
      return sys_fail(me + ": rank " + std::to_string(j) + " (pid " + std::to_string(pid) +
                      ") attached " + s.path + " but is gone");
  }
  return c;
}

Status ShmComm::check_peers(const std::vector<int>& peers) const {
  for (int j : peers) {
    const Segment& s = *seg_[static_cast<size_t>(j)];
    if (s.h->closed[s.other()].load(std::memory_order_seq_cst) != 0)
      return fail("rank " + std::to_string(rank()) + ": rank " + std::to_string(j) +
                  " closed the shared-memory connection (it failed or finished early)");
    pollfd p{s.pidfd.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) > 0)
      return fail("rank " + std::to_string(rank()) + ": rank " + std::to_string(j) + " (pid " +
                  std::to_string(s.h->pid[s.other()].load()) +
                  ") exited while transfers over shared memory with it were pending");
  }
  return {};
}

Status ShmComm::exchange_shm(std::span<const Xfer> xfers, bool* interrupted) {
  struct Queue {
    std::vector<const Xfer*> q;
    size_t head = 0, done = 0;
    bool busy() const { return head < q.size(); }
  };
  struct Peer {
    int peer;
    Segment* s;
    Queue out, in;
  };
  std::vector<Peer> peers;
  for (const auto& x : xfers) {
    auto it =
        std::find_if(peers.begin(), peers.end(), [&](const Peer& p) { return p.peer == x.peer; });
    if (it == peers.end()) {
      peers.push_back(Peer{x.peer, seg_[static_cast<size_t>(x.peer)].get(), {}, {}});
      it = peers.end() - 1;
    }
    TB_CHECK(it->s != nullptr);
    (x.kind == Xfer::kSend ? it->out : it->in).q.push_back(&x);
  }
  const std::string me = "rank " + std::to_string(rank());

  auto idle_deadline = Clock::now() + o_.timeout;
  board_->note(mono_ns(idle_deadline - o_.timeout));  // starting a step is progress too
  auto last_check = Clock::now();
  std::vector<FutexWait> waits;
  bool gone = false;  // a peer closed or exited: one more look at the rings, then fail
  for (;;) {
    if (interrupted_.load(std::memory_order_acquire)) {
      *interrupted = true;
      return fail(me +
                  ": shared-memory transfers interrupted (the communicator's other "
                  "transport failed)");
    }
    bool moved = false, busy = false;
    // Receives first: the peer's bytes may be waiting for room in the ring this rank reads.
    for (auto& p : peers) {
      while (p.in.busy()) {
        const Xfer& x = *p.in.q[p.in.head];
        const size_t n =
            p.s->in.read(static_cast<std::byte*>(x.buf) + p.in.done, x.len - p.in.done);
        if (n == 0) break;
        moved = true;
        if ((p.in.done += n) == x.len) {
          ++p.in.head;
          p.in.done = 0;
        }
      }
      busy = busy || p.in.busy();
    }
    for (auto& p : peers) {
      while (p.out.busy()) {
        const Xfer& x = *p.out.q[p.out.head];
        const size_t n = p.s->out.write(static_cast<const std::byte*>(x.buf) + p.out.done,
                                        std::min(kPiece, x.len - p.out.done));
        if (n == 0) break;
        moved = true;
        if ((p.out.done += n) == x.len) {
          ++p.out.head;
          p.out.done = 0;
        }
      }
      busy = busy || p.out.busy();
    }
    if (!busy) return {};
    const auto now = Clock::now();
    if (moved) {
      idle_deadline = now + o_.timeout;
      board_->note(mono_ns(now));
      gone = false;
      continue;
    }
    if (gone || now - last_check >= kPeerCheck) {
      last_check = now;
      // Only the peers this rank still waits for: one whose transfers are done may have finished
      // and closed its side already.
      std::vector<int> waiting_for;
      for (const auto& p : peers)
        if (p.in.busy() || p.out.busy()) waiting_for.push_back(p.peer);
      if (auto st = check_peers(waiting_for); !st) {
        if (gone) return st;
        gone = true;  // bytes it wrote before it went are still its data
        continue;
      }
    }
    if (now >= idle_deadline) {
      const int64_t last = board_->latest();
      const auto last_any = Clock::time_point(std::chrono::nanoseconds(last));
      if (last_any + o_.timeout <= idle_deadline) {
        std::string waiting;
        for (const auto& p : peers)
          if (p.in.busy() || p.out.busy())
            waiting += (waiting.empty() ? "" : ", ") + std::to_string(p.peer);
        return fail(me + ": timed out: no progress for " + std::to_string(o_.timeout.count()) +
                    " ms on shared-memory transfers with rank(s) " + waiting +
                    ", nor by any other rank of the communicator");
      }
      idle_deadline = last_any + o_.timeout;  // another rank moved bytes: wait on
    }
    // Sleep on every ring this rank waits for, and on interrupt().
    waits.clear();
    bool changed = false;
    std::vector<Ring*> slept_in, slept_out;
    for (auto& p : peers) {
      if (p.in.busy()) {
        const FutexWait w = p.s->in.consumer_sleep();
        if (!w.word)
          changed = true;
        else {
          waits.push_back(w);
          slept_in.push_back(&p.s->in);
        }
      }
      if (p.out.busy()) {
        const FutexWait w = p.s->out.producer_sleep();
        if (!w.word)
          changed = true;
        else {
          waits.push_back(w);
          slept_out.push_back(&p.s->out);
        }
      }
    }
    if (!changed) {
      waits.push_back(FutexWait{reinterpret_cast<uint32_t*>(&interrupted_), 0});
      wait_any(waits, std::min(idle_deadline, Clock::now() + kPeerCheck));
    }
    for (Ring* r : slept_in) r->consumer_awake();
    for (Ring* r : slept_out) r->producer_awake();
  }
}

Status ShmComm::do_exchange(std::span<const Xfer> xfers) {
  std::vector<Xfer> over_shm, over_inner;
  for (const auto& x : xfers)
    (seg_[static_cast<size_t>(x.peer)] ? over_shm : over_inner).push_back(x);
  bool interrupted = false;
  if (over_inner.empty()) return exchange_shm(over_shm, &interrupted);
  TB_CHECK(inner_ != nullptr);
  if (over_shm.empty()) return inner_->exchange(over_inner);
  // Both: the inner part on a second thread, shared memory here; the first error stops both.
  Status inner_st;
  std::thread t([&] {
    inner_st = inner_->exchange(over_inner);
    if (!inner_st) {
      interrupted_.store(1, std::memory_order_release);
      wake(interrupted_);
    }
  });
  Status st = exchange_shm(over_shm, &interrupted);
  if (!st && !interrupted) inner_->interrupt();
  t.join();
  if (!st && !interrupted) return st;  // the first error, not the "interrupted" it caused
  if (!inner_st) return inner_st;
  return st;
}

void ShmComm::interrupt() {
  interrupted_.store(1, std::memory_order_release);
  wake(interrupted_);
  if (inner_) inner_->interrupt();
}

void ShmComm::abort() {
  // Closing every segment makes peers waiting on this rank fail now, not at their timeout.
  for (const auto& s : seg_)
    if (s) {
      s->h->closed[s->side].store(1, std::memory_order_seq_cst);
      s->out.wake_all();
      s->in.wake_all();
    }
  if (inner_ && !inner_->failed()) inner_->fail_with(*failed());
}

}  // namespace tb::collective
