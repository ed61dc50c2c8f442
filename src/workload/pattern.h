// Data for correctness runs (nccl-tests' verifiable data idea): inputs drawn from a hash with
// no short period, integer-valued so every reduction is exact in any order and for every type
// (float included), with expected outputs in closed form, so a check costs O(count) per rank
// whatever the rank count.
//
// h(tag, i) = splitmix64(key(seed, tag) + i), tag = a rank or one of the pattern's own streams.
// Input element i of rank r for seed s:
//   moving collectives (AllGather, Broadcast, AllToAll, SendRecv): v = h(r, i) in [-3000, 3000];
//   sum: v = c(i) + g(r, i) - g(r + 1, i), c in [-1000, 1000], g in [-1000, 1000]; the ranks'
//        sum telescopes to n c(i) + g(0, i) - g(n, i);
//   min (max): v = base(i), or base(i) + (-) 1..1000 on every rank but one, chosen by hash;
//   prod: v = +-1 (exact; the bench refuses prod, whose check is O(ranks) per element).
// Every |v| <= 3000, so any partial sum over up to 4096 ranks stays below 2^24 and is exact in
// float. An output shifted by any delta reads a value independent of the expected one: it
// differs on all but about 1 in 2000 elements. Pure functions; thread-safe.
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
// Writes what the collective must produce into the receive buffer (tests).
void fill_expected(const collective::Call& call, int rank, int size, uint64_t seed);
// Writes a sentinel over the receive buffer, so an output never written is caught. In place,
// poison first, then fill the input (the input lies inside the output).
void poison_output(const collective::Call& call, int size);

}  // namespace tb::workload
