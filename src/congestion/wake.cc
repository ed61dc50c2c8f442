#include "congestion/wake.h"

#include <linux/pkt_cls.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace tb::congestion {
namespace {

long bpf(int cmd, bpf_attr* attr) {
  return ::syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xF;
  i.src_reg = src & 0xF;
  i.off = off;
  i.imm = imm;
  return i;
}

}  // namespace

std::vector<bpf_insn> count_program(int map_fd, uint32_t offset) {
  return {
      // r2 = skb->len (struct __sk_buff's first field; r1 is the context)
      insn(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 0, 0),
      // r1 = &value[offset] of map_fd's element 0 (a 16-byte load: the second half's imm is the
      // offset)
      insn(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_VALUE, 0, map_fd),
      insn(0, 0, 0, 0, static_cast<int32_t>(offset)),
      // lock *(u64 *)(r1 + 0) += r2
      insn(BPF_STX | BPF_ATOMIC | BPF_DW, 1, 2, 0, BPF_ADD),
      // return TC_ACT_UNSPEC: the packet goes on
      insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, TC_ACT_UNSPEC),
      insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
  };
}

Result<ByteCounters> ByteCounters::create(size_t ports) {
  if (ports == 0) return fail("no port to count");
  ByteCounters c;
  bpf_attr a{};
  a.map_type = BPF_MAP_TYPE_ARRAY;
  a.key_size = 4;
  a.value_size = static_cast<uint32_t>(ports * sizeof(uint64_t));
  a.max_entries = 1;
  a.map_flags = BPF_F_MMAPABLE;
  std::strncpy(a.map_name, "tb_cong_wake", sizeof(a.map_name) - 1);
  const long m = bpf(BPF_MAP_CREATE, &a);
  if (m < 0) return sys_fail("bpf(BPF_MAP_CREATE, an mmapable array)");
  c.map_.reset(static_cast<int>(m));
  const long page = ::sysconf(_SC_PAGESIZE);
  c.mem_len_ = (ports * sizeof(uint64_t) + static_cast<size_t>(page) - 1) /
               static_cast<size_t>(page) * static_cast<size_t>(page);
  void* mem = ::mmap(nullptr, c.mem_len_, PROT_READ, MAP_SHARED, c.map_.get(), 0);
  if (mem == MAP_FAILED) {
    c.mem_len_ = 0;
    return sys_fail("mmap of the BPF byte-counter map");
  }
  c.mem_ = mem;
  static const char kLicense[] = "GPL";
  for (size_t i = 0; i < ports; ++i) {
    const auto prog = count_program(c.map_.get(), static_cast<uint32_t>(i * sizeof(uint64_t)));
    char log[512] = {};
    bpf_attr p{};
    p.prog_type = BPF_PROG_TYPE_SCHED_CLS;
    p.insns = reinterpret_cast<uint64_t>(prog.data());
    p.insn_cnt = static_cast<uint32_t>(prog.size());
    p.license = reinterpret_cast<uint64_t>(kLicense);
    p.log_buf = reinterpret_cast<uint64_t>(log);
    p.log_size = sizeof(log);
    p.log_level = 1;
    std::strncpy(p.prog_name, "tb_cong_wake", sizeof(p.prog_name) - 1);
    const long fd = bpf(BPF_PROG_LOAD, &p);
    if (fd < 0) {
      const int e = errno;
      std::string why = "bpf(BPF_PROG_LOAD, a SCHED_CLS byte counter)";
      if (log[0]) why += " (verifier: " + std::string(log, ::strnlen(log, sizeof(log))) + ")";
      return sys_fail(why, e);
    }
    c.programs_.emplace_back(static_cast<int>(fd));
  }
  return c;
}

ByteCounters::ByteCounters(ByteCounters&& o) noexcept
    : map_(std::move(o.map_)),
      programs_(std::move(o.programs_)),
      mem_(std::exchange(o.mem_, nullptr)),
      mem_len_(std::exchange(o.mem_len_, 0)) {}

ByteCounters& ByteCounters::operator=(ByteCounters&& o) noexcept {
  if (this != &o) {
    if (mem_) ::munmap(mem_, mem_len_);
    map_ = std::move(o.map_);
    programs_ = std::move(o.programs_);
    mem_ = std::exchange(o.mem_, nullptr);
    mem_len_ = std::exchange(o.mem_len_, 0);
  }
  return *this;
}

ByteCounters::~ByteCounters() {
  if (mem_) ::munmap(mem_, mem_len_);
}

uint64_t ByteCounters::bytes(size_t i) const {
  return __atomic_load_n(static_cast<const uint64_t*>(mem_) + i, __ATOMIC_RELAXED);
}

}  // namespace tb::congestion
