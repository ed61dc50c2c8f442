// ShmComm: the pairs of ranks on one emulated server over shared memory (as NCCL's SHM/P2P
// transports move bytes between GPUs of one server), every other pair over an inner Comm
// (TcpComm, RdmaComm; InprocComm in tests). Off unless asked for (--intra-server shm): its bytes
// bypass the emulated NVLink link, so NVLink shaping and faults do not touch them.
//
// Segments: one file per pair, "<prefix><lo>-<hi>" (lo < hi the ranks), under /dev/shm in a
// lab (prefix from core/shm_names.h: /dev/shm/testbedctl.<lab>.<run id>., the owner marker in
// the name), mode 0600, owned by this user (another owner is refused). It holds a header (each
// side's pid, "attached" and "closed" flags) and two ShmRings (collective/shm/ring.h), one per
// direction, of `ring_bytes` each. Set-up: both sides open (creating) and size the file (a new
// file is zero-filled: the rings' initial state), map it, write their pid and attached flag and
// wait, bounded by the timeout, for the other's; once both are attached the file is unlinked,
// so the kernel frees it when the last of the two processes exits, killed or not. Only a rank
// that dies during set-up leaves a file behind; the orchestrator removes the job's files when
// the job ends and `down` removes the lab's (by the name's prefix).
//
// Exchange: the shared-memory transfers run on the calling thread (receives, then sends, as
// TcpComm: a ring takes what fits, a receive what arrived); when nothing can move, the thread
// sleeps on every ring it waits for at once (futex_waitv), no spinning. The inner Comm's
// transfers of a mixed exchange run on a second thread; the first error stops both
// (Comm::interrupt).
//
// Failure: abort() sets this side's "closed" flag in every segment and wakes the other side,
// which fails at once ("rank P closed the shared-memory connection"). A peer killed outright
// sets nothing: each side holds a pidfd of its peer and looks at it whenever a wait ends, and
// waits at most kPeerCheck, so a dead peer fails its shared-memory neighbours within that.
// The timeout is the collective's, as TcpComm's: a transfer fails when it moved no byte for
// the timeout and no rank of the communicator moved one either (collective/progress.h).
//
// One thread uses a ShmComm at a time, except interrupt(), which is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "collective/comm.h"
#include "collective/progress.h"
#include "collective/shm/ring.h"
#include "core/unique_fd.h"
#include "core/units.h"

namespace tb::collective {

// The ring per direction a lab's job uses, and the range the option (and tests) may ask for.
inline constexpr size_t kShmRingBytes = 1 << 20;
inline constexpr IntRange kShmRingBytesRange{1, 1 << 30};
// The longest a waiting rank goes without looking at its peers' pidfds.
inline constexpr std::chrono::milliseconds kPeerCheck{50};

struct ShmOptions {
  int rank = 0, size = 1;
  std::vector<char> shm;   // by rank: 1 = this pair over shared memory; the rest go to `inner`
  std::string prefix;      // segment path prefix (core/shm_names.h in a lab; a temp dir in tests)
  std::string board_path;  // the communicator's progress board (collective/progress.h)
  std::chrono::milliseconds timeout{30000};
  size_t ring_bytes = kShmRingBytes;
};

class ShmComm final : public Comm {
 public:
  // Attaches every shared-memory pair of this rank (bounded by o.timeout). `inner` carries the
  // other pairs (it may be null when there are none); its rank and size are this one's.
  static Result<std::unique_ptr<ShmComm>> connect(const ShmOptions& o, std::unique_ptr<Comm> inner);
  ~ShmComm() override;

  // Whole ring steps: the rings pipeline a step themselves (as socket buffers do), and the
  // inner transports want whole steps too.
  size_t slice_bytes() const override { return kWholeSteps; }
  void interrupt() override;

  // The peers over shared memory, and the inner Comm (null when every pair is shared memory).
  const std::vector<int>& shm_peers() const { return shm_peers_; }
  Comm* inner() const { return inner_.get(); }

  struct Segment;  // one pair's mapping (shm.cc)

 protected:
  Status do_exchange(std::span<const Xfer> xfers) override;
  void abort() override;

 private:
  ShmComm(const ShmOptions& o, std::unique_ptr<Comm> inner);
  // *interrupted: it failed because interrupt() was called (the inner part failed first).
  Status exchange_shm(std::span<const Xfer> xfers, bool* interrupted);
  // Fails when a peer of `peers` closed its side or exited.
  Status check_peers(const std::vector<int>& peers) const;

  ShmOptions o_;
  std::vector<int> shm_peers_;
  std::vector<std::unique_ptr<Segment>> seg_;  // by rank; null where not shared memory
  std::unique_ptr<Comm> inner_;
  std::unique_ptr<ProgressBoard> board_;
  std::atomic<uint32_t> interrupted_{0};  // a futex word: 1 once interrupt() was called
};

}  // namespace tb::collective
