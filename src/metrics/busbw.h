// nccl-tests' bandwidth arithmetic (doc/PERFORMANCE.md): algbw = S / t, busbw = algbw x a
// per-collective factor from the least traffic a rank must move, so busbw compares directly
// with a link's rate whatever the rank count. GB = 1e9 bytes. Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "collective/types.h"

namespace tb::metrics {

// AllReduce 2(n-1)/n; AllGather, ReduceScatter, AllToAll (n-1)/n; the rest 1.
double bus_factor(collective::Coll c, int n);

// Bytes the `size` column shows for a per-rank `count` (nccl-tests' max(send, recv) bytes).
uint64_t size_bytes(collective::Coll c, uint64_t count, int n, collective::DataType t);
// The per-rank count for a requested size (the inverse, rounded down, at least 1).
uint64_t count_for(collective::Coll c, uint64_t bytes, int n, collective::DataType t);

struct Bandwidth {
  double algbw_gbps = 0;  // GB/s (1e9 bytes)
  double busbw_gbps = 0;
};
Bandwidth bandwidth(collective::Coll c, uint64_t size, double time_us, int n);

}  // namespace tb::metrics
