"""Each GEMM of train.py's MLP step (784-512-256-10) alone, gpucore vs numpy (issue 19).

Run from the repository root::

    python benchmarks/mlp_gemms.py                        # batch 64 and 256, both threads
    GPUCORE_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/mlp_gemms.py --cpu-time

A step runs 8 GEMMs: each layer's forward ``x @ W.T + b`` (``fast_linear``), the input gradient
``dY @ W`` of the last two layers and every weight gradient ``dY.T @ X`` (``fast_matmul`` with the
transpose in the flags, as linear's backward calls them; the batch is the reduction there).
Each row times the gpucore call and numpy's on the same float32 arrays, in alternating blocks of
calls with a pause before each block (medians; see median_pair); ``--cpu-time`` times by this
thread's CPU time instead of wall time (with one thread each: robust to other processes on a
shared machine). The last row is the sum: the step's GEMM part when every operand is in cache.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_env, also under -m
from bench_env import CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("mlp_gemms.py")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "gpucore")) and _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)  # benchmark the checkout this script lives in
os.environ["GPUCORE_DEVICE"] = "cpu"

import gpucore  # noqa: E402
from gpucore import _cpu  # noqa: E402

LAYERS = ((784, 512), (512, 256), (256, 10))


def gemms(batch: int, rng: np.random.Generator) -> list:
    """(label, M x K x N, gpucore call, numpy call) for each GEMM of the step."""
    out = []
    for i, (fin, fout) in enumerate(LAYERS, 1):
        x = rng.standard_normal((batch, fin), dtype=np.float32)
        w = rng.standard_normal((fout, fin), dtype=np.float32)
        b = rng.standard_normal(fout, dtype=np.float32)
        g = rng.standard_normal((batch, fout), dtype=np.float32)
        tx, tw, tb, tg = (gpucore.from_numpy(a) for a in (x, w, b, g))
        out.append(
            (
                f"L{i} forward x @ W.T + b",
                (batch, fin, fout),
                lambda tx=tx, tw=tw, tb=tb: _cpu.fast_linear(tx, tw, tb),
                lambda x=x, w=w, b=b: x @ w.T + b,
            )
        )
        if i > 1:
            out.append(
                (
                    f"L{i} dX = dY @ W",
                    (batch, fout, fin),
                    lambda tg=tg, tw=tw: _cpu.fast_matmul(tg, tw, False),
                    lambda g=g, w=w: g @ w,
                )
            )
        out.append(
            (
                f"L{i} dW = dY.T @ X",
                (fout, batch, fin),
                lambda tg=tg, tx=tx: _cpu.fast_matmul(tg, tx, True),
                lambda g=g, x=x: g.T @ x,
            )
        )
    return out


def median_pair(f, g, n: int, clock, blocks: int = 8) -> tuple[float, float]:
    """Medians (µs) of n calls each of f and g, in alternating blocks of calls with a pause
    before each block: OpenBLAS's worker threads spin on after a numpy call, and on 2 cores
    that takes the second core from a gpucore call made right after it (calls alternated one
    by one measured gpucore's GEMMs at about half their speed)."""
    tf, tg = [], []
    per = max(1, n // blocks)
    for _ in range(blocks):
        for fn, acc in ((f, tf), (g, tg)):
            time.sleep(0.3)  # (bench_cpu.settle's pause: 0.05 s is not enough here)
            for _ in range(per):
                t0 = clock()
                fn()
                acc.append(clock() - t0)
    return statistics.median(tf) * 1e6, statistics.median(tg) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, action="append", help="batch sizes (default 64, 256)")
    ap.add_argument("--rounds", type=int, default=400, help="calls of each per row")
    ap.add_argument("--cpu-time", action="store_true", help="time by this thread's CPU time")
    args = ap.parse_args()
    clock = time.thread_time if args.cpu_time else time.perf_counter
    rng = np.random.default_rng(0)
    share = CpuShare()
    what = "thread CPU" if args.cpu_time else "wall"
    print(f"threads: gpucore {gpucore.get_num_threads()}; times: {what} µs, medians\n")
    print("| batch | GEMM | M x K x N | gpucore µs | numpy µs | gc/np | gc GFLOP/s |")
    print("|------:|------|-----------|-----------:|---------:|------:|-----------:|")
    for batch in args.batch or [64, 256]:
        tot_g = tot_n = 0.0
        for label, (m, k, n), fg, fn in gemms(batch, rng):
            for _ in range(20):
                fg(), fn()
            a, b = median_pair(fg, fn, args.rounds, clock)
            tot_g, tot_n = tot_g + a, tot_n + b
            gf = 2.0 * m * n * k / a / 1e3
            cells = (batch, label, f"{m}x{k}x{n}", f"{a:.1f}", f"{b:.1f}", f"{a / b:.2f}")
            cells += (f"{gf:.0f}",)
            print("| " + " | ".join(str(c) for c in cells) + " |")
        print(f"| {batch} | **sum** | | {tot_g:.1f} | {tot_n:.1f} | {tot_g / tot_n:.2f} | |")
    print("\n" + load_note(share.others(), "during the run"))


if __name__ == "__main__":
    main()
