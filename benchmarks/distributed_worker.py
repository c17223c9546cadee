"""Run under mpirun by benchmarks/distributed.py: all_reduce bandwidth of gpucore tensors against
raw mpi4py, and DDP training steps with the overlap on and off. Rank 0 prints JSON lines."""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import gpucore as gc  # noqa: E402
import gpucore.distributed as dist  # noqa: E402
from benchmarks.train import gpucore_model  # noqa: E402
from gpucore import nn  # noqa: E402
from gpucore.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

# before mpi4py starts MPI: init_process_group picks Open MPI's fast non-blocking all-reduce
dist.init_process_group()
from mpi4py import MPI  # noqa: E402

R, N = dist.get_rank(), dist.get_world_size()
COMM = MPI.COMM_WORLD


def emit(**row):
    if R == 0:
        print(json.dumps(row), flush=True)


def timed(fn, reps: int) -> float:
    ts = []
    for _ in range(reps):
        COMM.Barrier()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def bench_all_reduce():
    """Raw and gpucore calls alternate, so both see the same machine (it is shared and its
    speed drifts); medians of each, and the median of the per-pair ratios."""
    for nbytes in [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]:
        reps = 200 if nbytes <= 1 << 20 else 30
        arr = np.ones(nbytes // 4, np.float32)
        t = gc.ones(nbytes // 4)
        raw, ours = [], []
        for _ in range(reps):
            raw.append(timed(lambda arr=arr: COMM.Allreduce(MPI.IN_PLACE, arr), 1))
            ours.append(timed(lambda t=t: dist.all_reduce(t), 1))
        ratio = float(np.median(np.array(raw) / np.array(ours)))
        emit(kind="all_reduce", nbytes=nbytes, raw=float(np.median(raw)),
             gpucore=float(np.median(ours)), ratio=ratio)  # fmt: skip


def bench_training(kind: str, batch: int, steps: int = 30):
    rng = np.random.default_rng(0)
    shape = (batch, 784) if kind == "mlp" else (batch, 1, 28, 28)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, 10, batch)
    lo, hi = R * batch // N, (R + 1) * batch // N
    xb, yb = gc.tensor(x[lo:hi]), gc.tensor(y[lo:hi])
    modes = ("overlap", "after backward", "no communication") if N > 1 else ("one process",)
    for mode in modes:
        gc.manual_seed(0)
        model = gpucore_model(kind)
        # "no communication": every rank steps its own shard, nothing reduced: what the
        # machine's cores give N processes at once, the bound for the other two modes
        net = DDP(model) if N > 1 and mode != "no communication" else model
        params = list(model.parameters())
        opt = gc.optim.Adam(params, lr=1e-3)

        def step(mode=mode, net=net, params=params, opt=opt):
            opt.zero_grad()
            if mode == "after backward":  # one all-reduce of every gradient once backward ended
                with net.no_sync():
                    nn.functional.cross_entropy(net(xb), yb).backward()
                flat = np.concatenate([p.grad.numpy().reshape(-1) for p in params])
                COMM.Allreduce(MPI.IN_PLACE, flat)
                flat /= N
                at = 0
                for p in params:
                    n = p.numel()
                    p.grad.numpy().reshape(-1)[:] = flat[at : at + n]
                    at += n
            else:
                nn.functional.cross_entropy(net(xb), yb).backward()
            opt.step()

        for _ in range(5):
            step()
        emit(kind="train", model=kind, batch=batch, ranks=N, mode=mode, step=timed(step, steps))


bench_all_reduce() if N > 1 else None
bench_training("mlp", 256)
bench_training("cnn", 64)
dist.destroy_process_group()
