// The native collectives: run one Call over a Comm. Algorithms (see docs/collectives.md):
//   AllReduce      ring (reduce-scatter + all-gather), tree (pipelined binary tree: reduce up,
//                  broadcast down), hd (Rabenseifner halving-doubling, any rank count), hier
//                  (reduce-scatter inside each node, all-reduce per local index across nodes,
//                  all-gather inside; needs equal ranks per node)
//   AllGather, ReduceScatter   ring
//   Broadcast, Reduce          ring (pipelined chain from/to the root), tree (pipelined binary)
//   AllToAll                   direct (every pair at once)
//   SendRecv                   ring shift (send to next, receive from previous)
// Every rank must call the same collectives in the same order with the same arguments
// (except buffers). Thread-safety: as the Comm's.
#pragma once

#include "collective/comm.h"
#include "collective/types.h"

namespace tb::collective {

// Checks the call against the communicator (algorithm implemented, root in range, hier's
// node layout) without moving data.
Status check(const Comm& comm, const Call& call);

Status run(Comm& comm, const Call& call);

// What runs for `call`: "ring", "tree", "hd", "hier", "direct", "ring shift".
std::string algo_label(const Call& call);

}  // namespace tb::collective
