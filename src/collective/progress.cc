#include "collective/progress.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>

#include "core/safe_file.h"

namespace tb::collective {
namespace {

constexpr size_t kSlot = 64;  // one cache line per rank: writers never share a line

}  // namespace

Result<std::unique_ptr<ProgressBoard>> ProgressBoard::watch(const std::string& path, int size) {
  auto b = open(path, 0, size);
  if (b) (*b)->rank_ = -1;
  return b;
}

Result<std::unique_ptr<ProgressBoard>> ProgressBoard::open(const std::string& path, int rank,
                                                           int size) {
  TB_CHECK(rank >= 0 && rank < size);
  auto fd = open_file(path, O_RDWR | O_CREAT);
  if (!fd) return std::unexpected(with_context(fd.error(), "progress board"));
  const size_t bytes = kSlot * static_cast<size_t>(size);
  // Every rank sizes it the same; growing a file zero-fills, an equal size changes nothing.
  if (::ftruncate(fd->get(), static_cast<off_t>(bytes)) != 0)
    return sys_fail("progress board " + path + ": ftruncate");
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
  if (m == MAP_FAILED) return sys_fail("progress board " + path + ": mmap");
  return std::unique_ptr<ProgressBoard>(new ProgressBoard(m, bytes, rank, size));
}

ProgressBoard::~ProgressBoard() {
  ::munmap(map_, bytes_);
}

int64_t* ProgressBoard::slot(int r) const {
  return reinterpret_cast<int64_t*>(static_cast<char*>(map_) + kSlot * static_cast<size_t>(r));
}

void ProgressBoard::note(int64_t mono_ns) {
  TB_CHECK(rank_ >= 0);
  std::atomic_ref<int64_t>(*slot(rank_)).store(mono_ns, std::memory_order_relaxed);
}

int64_t ProgressBoard::latest() const {
  int64_t t = 0;
  for (int r = 0; r < size_; ++r)
    t = std::max(t, std::atomic_ref<int64_t>(*slot(r)).load(std::memory_order_relaxed));
  return t;
}

}  // namespace tb::collective
