// Data for correctness runs: integer-valued inputs whose reductions are exact in any order
// (float sums of small integers stay below 2^24), and expected outputs from closed forms, so
// a check costs O(count) per rank whatever the rank count (nccl-tests' verifiable data idea).
// Input element i of rank r, check seed s:  v = a(i, s) + r * b(i, s), a in [-8, 8],
// b in {-1, 0, 1}. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collective/types.h"

namespace tb::workload {

// Fills this rank's send buffer (send_elems of the collective) for seed `seed`.
void fill_input(const collective::Call& call, int rank, int size, uint64_t seed);
// Counts elements of the receive buffer that differ from what the collective must produce.
// Ranks whose receive buffer is undefined (non-roots of Reduce) count nothing.
uint64_t count_wrong(const collective::Call& call, int rank, int size, uint64_t seed);
// Writes a sentinel over the receive buffer, so an output never written is caught.
void poison_output(const collective::Call& call, int size);

}  // namespace tb::workload
