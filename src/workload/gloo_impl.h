// The Gloo cross-check: an Impl that runs each collective through Gloo (Debian's libgloo-dev,
// pytorch/gloo commit 5b14351) over its tcp transport, so the bench can compare our native
// collectives with an independent implementation on the same links.
//
// What runs (see algo_label):
//   AllReduce      ring -> gloo::allreduce (options API, Algorithm::RING: segmented ring
//                  reduce-scatter + all-gather; the legacy AllreduceRing passes the whole buffer
//                  round the ring n-1 times and is not used), hd -> gloo::AllreduceHalvingDoubling
//   AllGather      gloo::allgather (options API; a ring)
//   ReduceScatter  gloo::ReduceScatterHalvingDoubling (legacy; every rank receives `count`)
//   Broadcast      gloo::broadcast (options API; a binomial tree, so its Algo is kTree)
//   Reduce         gloo::reduce (options API; ring reduce-scatter then gather to the root: kRing)
//   AllToAll       gloo::alltoall (options API; every pair at once: reported as kRing, the
//                  only algorithm the native side names for it)
//   SendRecv       unbound buffers: send to (r+1)%n, receive from (r-1+n)%n (kRing)
// The legacy (bound-buffer) algorithms work on a buffer the Impl owns and keeps per
// (collective, algo, type, op, count), so every call copies send into it and the result out;
// caching by the caller's buffer addresses would let ranks disagree on when to rebuild, and a
// rebuild takes fresh Gloo slots that every rank must take at the same call.
//
// One Impl per rank (process, or thread in tests); not thread-safe. Every Gloo wait uses
// GlooOptions::timeout_ms, and so does the rendezvous. After the first failure (a Gloo
// exception: timeout, a peer gone) every later run() returns that error at once.
#pragma once

#include <memory>
#include <string>

#include "core/error.h"
#include "workload/impl.h"

namespace tb::workload {

struct GlooOptions {
  int rank = 0, size = 1;
  std::string store_dir;   // a directory every rank can see: gloo::rendezvous::FileStore lives here
  std::string prefix;      // PrefixStore key prefix (one run = one prefix)
  std::string address;     // IPv4 address to bind this rank's gloo tcp device to (attr.hostname)
  int timeout_ms = 30000;  // context timeout: every wait in gloo, and the rendezvous
};

// Connects the full mesh (one TCP connection per peer) and returns the Impl. Blocks until
// every rank has joined or the timeout passes; the error names the rank, the address and
// what Gloo said.
Result<std::unique_ptr<Impl>> make_gloo_impl(const GlooOptions& o);

// What a Gloo Impl would answer, without connecting (the bench checks flags up front).
collective::Algo gloo_default_algo(collective::Coll coll);
Status gloo_supports(collective::Coll coll, collective::Algo algo);

}  // namespace tb::workload
