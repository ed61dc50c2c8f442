#!/usr/bin/python3
"""A small PyTorch DDP job (gloo backend) for `testbedctl launch`: it trains an MLP for a few
steps on data that differs per rank, then checks that every rank holds identical parameters
(DDP averages the gradients, so they must be) and exits 1 when they differ.

Run it under Debian's /usr/bin/python3 (python3-torch); a python3 found first on PATH may be
another interpreter without torch, and this says so and exits 2.

  testbedctl launch mini -- /usr/bin/python3 tests/e2e/jobs/ddp_train.py --steps 5

Options: --steps, --batch, --hidden (the model's width: gradient bytes = 4 x parameters),
--fail-rank R --fail-step S (rank R exits 1 at step S), --hang-rank R (rank R sleeps forever
before training: for --timeout and `down` tests). Each step prints
"step N loss L step_ms T"; the end prints "summary ..." and "params identical ...".
"""
import argparse
import os
import sys
import time

try:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
except ImportError as e:
    print(f"ddp_train.py: cannot import torch under {sys.executable} ({e}); run it with "
          "/usr/bin/python3 (Debian's python3-torch, scripts/setup --with launch)", file=sys.stderr)
    sys.exit(2)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--fail-rank", type=int, default=-1)
    p.add_argument("--fail-step", type=int, default=1)
    p.add_argument("--hang-rank", type=int, default=-1)
    a = p.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    if rank == a.hang_rank:
        print(f"rank {rank}: hanging on purpose", flush=True)
        while True:
            time.sleep(1)
    dist.init_process_group("gloo", init_method="env://", timeout=__import__("datetime").timedelta(seconds=120))
    print(f"rank {rank}/{world} local {os.environ['LOCAL_RANK']}/{os.environ['LOCAL_WORLD_SIZE']} "
          f"group {os.environ['GROUP_RANK']} on {os.environ.get('TESTBEDCTL_NODE', '?')} "
          f"via {os.environ.get('GLOO_SOCKET_IFNAME', '?')}", flush=True)

    torch.manual_seed(0)  # the same initial model everywhere (DDP broadcasts rank 0's anyway)
    model = nn.Sequential(nn.Linear(a.features, a.hidden), nn.ReLU(),
                          nn.Linear(a.hidden, a.hidden), nn.ReLU(), nn.Linear(a.hidden, 10))
    ddp = DDP(model)
    params = sum(t.numel() for t in model.parameters())
    if rank == 0:
        print(f"model: {params} parameters, {4 * params} gradient bytes per step", flush=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(1000 + rank)  # each rank its own data
    times = []
    for step in range(a.warmup + a.steps):
        if rank == a.fail_rank and step == a.fail_step:
            print(f"rank {rank}: failing on purpose at step {step}", flush=True)
            # At once, as a crash would: sys.exit(1) runs the interpreter's and torch's shutdown
            # first, while its closed gloo sockets already fail a peer's allreduce; that peer
            # could exit 1 before this rank did and be named the job's first failure.
            os._exit(1)
        x = torch.randn(a.batch, a.features, generator=gen)
        y = torch.randint(0, 10, (a.batch,), generator=gen)
        t = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()  # the gradients' allreduce happens here
        opt.step()
        ms = (time.perf_counter() - t) * 1e3
        if step >= a.warmup:
            times.append(ms)
        print(f"step {step} loss {loss.item():.4f} step_ms {ms:.2f}", flush=True)

    flat = torch.cat([t.detach().reshape(-1) for t in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    bad = [r for r in range(world) if not torch.equal(gathered[r], gathered[0])]
    times.sort()
    med = times[len(times) // 2] if times else 0.0
    print(f"summary steps {a.steps} step_ms_median {med:.2f} samples_per_s "
          f"{(a.batch * world / (med / 1e3)) if med else 0:.1f} grad_bytes {4 * params}", flush=True)
    dist.destroy_process_group()
    if bad:
        print(f"params differ: ranks {bad} disagree with rank 0", flush=True)
        sys.exit(1)
    print(f"params identical across {world} ranks (sum {flat.double().sum().item():.6f})",
          flush=True)


if __name__ == "__main__":
    main()
