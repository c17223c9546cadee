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
    for nbytes in [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]:
        reps = 200 if nbytes <= 1 << 20 else 20
        arr = np.ones(nbytes // 4, np.float32)
        t = gc.ones(nbytes // 4)
        raw = timed(lambda arr=arr: COMM.Allreduce(MPI.IN_PLACE, arr), reps)
        ours = timed(lambda t=t: dist.all_reduce(t), reps)
        emit(kind="all_reduce", nbytes=nbytes, raw=raw, gpucore=ours)


def bench_training(kind: str, batch: int, steps: int = 30):
    rng = np.random.default_rng(0)
    shape = (batch, 784) if kind == "mlp" else (batch, 1, 28, 28)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, 10, batch)
    lo, hi = R * batch // N, (R + 1) * batch // N
    xb, yb = gc.tensor(x[lo:hi]), gc.tensor(y[lo:hi])
    for mode in ("overlap", "after backward") if N > 1 else ("one process",):
        gc.manual_seed(0)
        model = gpucore_model(kind)
        net = DDP(model) if N > 1 else model
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
