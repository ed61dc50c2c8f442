#!/usr/bin/python3
"""torch.distributed (gloo) AllReduce of one size, timed the way nccl-tests times it, for
`testbedctl launch` (scripts/bench-launch puts it next to the DDP job's step time on the same
tier). Prints on rank 0: "allreduce bytes B iters N time_us_median T algbw_GBps A busbw_GBps B"
(busbw = algbw x 2(n-1)/n, nccl-tests' AllReduce factor). Run it under /usr/bin/python3."""
import argparse
import os
import sys
import time

try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    print(f"allreduce_bench.py: cannot import torch under {sys.executable} ({e}); run it with "
          "/usr/bin/python3 (Debian's python3-torch)", file=sys.stderr)
    sys.exit(2)

p = argparse.ArgumentParser()
p.add_argument("--bytes", type=int, default=1 << 20)
p.add_argument("--iters", type=int, default=20)
p.add_argument("--warmup", type=int, default=3)
a = p.parse_args()
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="env://")
rank, n = dist.get_rank(), dist.get_world_size()
t = torch.ones(max(1, a.bytes // 4), dtype=torch.float32)
times = []
for i in range(a.warmup + a.iters):
    dist.barrier()
    s = time.perf_counter()
    dist.all_reduce(t)
    e = time.perf_counter() - s
    if i >= a.warmup:
        times.append(e)
# Every rank's time per iteration: the slowest rank's, as nccl-tests reports.
worst = torch.tensor(times, dtype=torch.float64)
dist.all_reduce(worst, op=dist.ReduceOp.MAX)
w = sorted(worst.tolist())
med = w[len(w) // 2]
algbw = t.numel() * 4 / med / 1e9
if rank == 0:
    print(f"allreduce bytes {t.numel() * 4} iters {a.iters} time_us_median {med * 1e6:.1f} "
          f"algbw_GBps {algbw:.4f} busbw_GBps {algbw * 2 * (n - 1) / n:.4f} ranks {n}", flush=True)
dist.destroy_process_group()
