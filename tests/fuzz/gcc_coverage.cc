// Coverage callbacks for a GCC-built fuzz target linked against clang's libFuzzer engine.
//
// GCC 12 offers -fsanitize-coverage=trace-pc (a call to __sanitizer_cov_trace_pc at every basic
// block) and trace-cmp, but not clang's trace-pc-guard or inline-8bit-counters; libFuzzer 14
// refuses trace-pc ("no longer supported") and otherwise sees no coverage. This file supplies
// the callback: each call site (the callback's return address, taken relative to the start of
// the executable) bumps one byte of an array placed in the __libfuzzer_extra_counters section,
// which libFuzzer reads as coverage after every input and clears before the next (counts
// saturate at 255). It also
// supplies the float/double comparison hooks GCC's trace-cmp emits and libFuzzer lacks.
//
// Built without sanitizers or coverage (CMakeLists.txt), linked ahead of libFuzzer, whose own
// weak __sanitizer_cov_trace_pc it replaces. Only under -DTB_FUZZ=ON.
#include <cstddef>
#include <cstdint>

extern "C" const char __executable_start[];  // GNU ld: the first byte of the image

namespace {

// One byte per 4 bytes of code, 4 MiB of code before two call sites share a byte: call
// instructions are 5 bytes long, so two return addresses are never within 4 bytes.
constexpr size_t kCounters = size_t{1} << 20;
__attribute__((section("__libfuzzer_extra_counters"), used)) uint8_t counters[kCounters];

}  // namespace

extern "C" {

void __sanitizer_cov_trace_pc() {
  const auto pc = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  const auto base = reinterpret_cast<uintptr_t>(__executable_start);
  uint8_t& c = counters[((pc - base) >> 2) & (kCounters - 1)];
  c += c != 255;  // saturate: a count that wraps to 0 would read as "not reached"
}

void __sanitizer_cov_trace_cmpf(float, float) {}
void __sanitizer_cov_trace_cmpd(double, double) {}

}  // extern "C"
