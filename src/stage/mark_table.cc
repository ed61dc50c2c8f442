// The mark table and the CE arithmetic (mark_table.h).
#include "stage/mark_table.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <utility>

#include "core/unique_fd.h"

namespace tb::stage {

struct MarkTable::Slot {
  uint32_t p;
  uint32_t pad;
  uint64_t ect, ce, not_ect;
};

namespace {

struct Header {
  uint32_t magic, version, slots, pad;
};
constexpr size_t kTableBytes = sizeof(Header) + kMarkSlots * 32;
static_assert(sizeof(uint64_t) * 3 + 8 == 32);

template <class T>
T load(const T& x) {
  return std::atomic_ref<T>(const_cast<T&>(x)).load(std::memory_order_relaxed);
}
template <class T>
void store(T& x, T v) {
  std::atomic_ref<T>(x).store(v, std::memory_order_relaxed);
}

}  // namespace

uint32_t mark_probability(uint64_t backlog, uint64_t kmin, uint64_t kmax, double pmax) {
  if (backlog <= kmin) return 0;
  if (backlog > kmax || kmax <= kmin) return kMarkAlways;
  const double f = pmax * static_cast<double>(backlog - kmin) / static_cast<double>(kmax - kmin);
  if (f >= 1.0) return kMarkAlways;
  return static_cast<uint32_t>(std::min(f * 4294967296.0, 4294967294.0));
}

int ecn_field(std::span<const uint8_t> ip) {
  if (ip.size() < 20 || (ip[0] >> 4) != 4 || (ip[0] & 0x0f) < 5) return -1;
  return ip[1] & 0x03;
}

uint16_t ipv4_header_sum(std::span<const uint8_t> ip) {
  const size_t n = static_cast<size_t>(ip[0] & 0x0f) * 4;
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < n && i + 1 < ip.size(); i += 2)
    sum += static_cast<uint32_t>(ip[i] << 8 | ip[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xffff);
}

bool set_ce(std::span<uint8_t> ip) {
  if (!is_ect(ip)) return false;
  const uint16_t old_word = static_cast<uint16_t>(ip[0] << 8 | ip[1]);
  ip[1] = static_cast<uint8_t>(ip[1] | 0x03);
  const uint16_t new_word = static_cast<uint16_t>(ip[0] << 8 | ip[1]);
  const uint16_t hc = static_cast<uint16_t>(ip[10] << 8 | ip[11]);
  // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m').
  uint32_t sum = static_cast<uint16_t>(~hc) +
                 static_cast<uint32_t>(static_cast<uint16_t>(~old_word)) + new_word;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  const uint16_t out = static_cast<uint16_t>(~sum & 0xffff);
  ip[10] = static_cast<uint8_t>(out >> 8);
  ip[11] = static_cast<uint8_t>(out & 0xff);
  return true;
}

Result<MarkTable> MarkTable::open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) return sys_fail("open mark table " + path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return sys_fail("stat mark table " + path);
  if (static_cast<size_t>(st.st_size) < kTableBytes &&
      ::ftruncate(fd.get(), static_cast<off_t>(kTableBytes)) != 0)
    return sys_fail("size mark table " + path);
  void* base = ::mmap(nullptr, kTableBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return sys_fail("map mark table " + path);
  auto* h = static_cast<Header*>(base);
  if (load(h->magic) == 0) {
    store(h->version, kMarkVersion);
    store(h->slots, kMarkSlots);
    store(h->magic, kMarkMagic);
  } else if (load(h->magic) != kMarkMagic || load(h->version) != kMarkVersion) {
    ::munmap(base, kTableBytes);
    return bad_input("mark table " + path + " is not one this build writes (magic/version)");
  }
  return MarkTable(base, kTableBytes);
}

MarkTable::MarkTable(MarkTable&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)) {}
MarkTable& MarkTable::operator=(MarkTable&& o) noexcept {
  if (this != &o) {
    if (base_) ::munmap(base_, size_);
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}
MarkTable::~MarkTable() {
  if (base_) ::munmap(base_, size_);
}

MarkTable::Slot* MarkTable::slot(int i) const {
  if (!base_ || i < 0 || static_cast<uint32_t>(i) >= kMarkSlots) return nullptr;
  return reinterpret_cast<Slot*>(static_cast<char*>(base_) + sizeof(Header)) + i;
}

uint32_t MarkTable::probability(int i) const {
  const Slot* s = slot(i);
  return s ? load(s->p) : 0;
}
void MarkTable::set_probability(int i, uint32_t p) {
  if (Slot* s = slot(i)) store(s->p, p);
}
void MarkTable::count(int i, bool ect, bool marked) {
  Slot* s = slot(i);
  if (!s) return;
  // One writer per slot (the stage serving it): load + store, no read-modify-write needed.
  if (!ect) {
    store(s->not_ect, load(s->not_ect) + 1);
    return;
  }
  store(s->ect, load(s->ect) + 1);
  if (marked) store(s->ce, load(s->ce) + 1);
}
MarkCounts MarkTable::counts(int i) const {
  const Slot* s = slot(i);
  if (!s) return {};
  return {load(s->ect), load(s->ce), load(s->not_ect)};
}

}  // namespace tb::stage
