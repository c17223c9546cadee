"""gpucore.special vs torch.special on 100,000 values (float64 by default; ``--dtype float32``) and
cov / corrcoef on 64 x 1000: ms per call, medians of 7 calls alternating between the libraries
call by call, both on ``--threads`` threads (default 1: the machine is shared).

Every torch.special kernel of gpucore is C (cpu/special*.c): the Bessel family, Airy's Ai, erfcx,
ndtri, entr, zeta, igamma and I0/I1 in double; the orthogonal polynomials in the element type,
as PyTorch's. Run: ``python benchmarks/special.py [--dtype float32] [--threads 2] [--only k0]
[--cpu-time]`` (``--only``: rows whose name contains the text; ``--cpu-time``: the calling
thread's CPU time instead of the wall clock, for a busy shared machine). The same script under
an older tree (its PYTHONPATH) times that tree's kernels: the before/after comparison.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from bench_env import median_ms, ratio_row

import gpucore
from gpucore import _cpu, special

try:
    import torch
except ImportError:
    torch = None

UNARY = ["i0", "i0e", "i1e", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1"]
UNARY += ["modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0"]
UNARY += ["scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai"]
UNARY += ["erfcx", "ndtri", "log_ndtr", "entr"]
BINARY = ["zeta", "gammainc", "gammaincc"]
BINARY += [f"chebyshev_polynomial_{k}" for k in "tuvw"]
BINARY += [f"shifted_chebyshev_polynomial_{k}" for k in "tuvw"]
BINARY += ["hermite_polynomial_h", "hermite_polynomial_he"]
BINARY += ["laguerre_polynomial_l", "legendre_polynomial_p"]


def _median_cpu_ms(calls: list, n: int) -> list:
    """median_ms by the calling thread's CPU time: on one thread every kernel runs on the caller,
    and on a shared machine the wall clock also counts the time other processes held the core."""
    times: list = [[] for _ in calls]
    for _ in range(n):
        for i, f in enumerate(calls):
            t0 = time.thread_time()
            f()
            times[i].append(time.thread_time() - t0)
    return [sorted(t)[len(t) // 2] * 1e3 for t in times]


_TIMER = median_ms


def _row(label: str, g, t) -> str:
    return ratio_row(label, g, t if torch is not None else None, 7, 2, _TIMER)


def _unary_input(name: str, x: np.ndarray) -> np.ndarray:
    if name == "ndtri":
        return x / 21
    if name == "airy_ai":
        return x - 10  # both sides: oscillating left, decaying right
    if name.startswith("bessel_j") or name == "spherical_bessel_j0":
        return x * 2 - 20
    return x


def _binary_inputs(name: str, x: np.ndarray) -> tuple:
    if "polynomial" in name:
        lo = 0.0 if name.startswith("shifted") else -1.0
        return lo + (x - 0.1) / 19.9 * (1 - lo), (np.arange(x.size) % 10).astype(float)
    if name == "zeta":
        return x + 1.5, x
    return x, x[::-1].copy()  # gammainc(a, x): a and x across each other


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", default="")
    ap.add_argument("--cpu-time", action="store_true", help="time by thread CPU time (1 thread)")
    args = ap.parse_args()
    global _TIMER
    if args.cpu_time:
        if args.threads != 1:
            sys.exit("--cpu-time needs --threads 1 (the pool's workers are not the caller)")
        _TIMER = _median_cpu_ms
    _cpu.set_num_threads(args.threads)
    if torch is not None:
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    x = rng.uniform(0.1, 20, 100_000)
    dt = np.dtype(args.dtype)
    clock = "thread CPU time" if args.cpu_time else "wall clock"
    print(f"{args.dtype}, 100,000 values, {args.threads} thread(s), {clock}")
    print("| function | gpucore ms | torch ms | ratio |\n|---|---|---|---|")
    for name in UNARY:
        if args.only not in name:
            continue
        print(name, file=sys.stderr)
        xs = _unary_input(name, x).astype(dt)
        g, t = gpucore.tensor(xs), torch.tensor(xs) if torch else None
        gf, tf = getattr(special, name), getattr(torch.special, name) if torch else None
        print(_row(f"{name}(x)", lambda gf=gf, g=g: gf(g), lambda tf=tf, t=t: tf(t)))
    for name in BINARY:
        if args.only not in name:
            continue
        print(name, file=sys.stderr)
        poly = "poly" in name
        u, v = (a.astype(dt) for a in _binary_inputs(name, x))
        gf, tf = getattr(special, name), getattr(torch.special, name) if torch else None
        ga, gb = gpucore.tensor(u), gpucore.tensor(v)
        ta, tb = (torch.tensor(u), torch.tensor(v)) if torch else (None, None)
        label = f"{name}(x, {'n' if poly else 'q' if name == 'zeta' else 'x'})"
        print(_row(label, lambda f=gf, a=ga, b=gb: f(a, b), lambda f=tf, a=ta, b=tb: f(a, b)))
    if args.only:
        return
    m = rng.normal(size=(64, 1000))
    g, t = gpucore.tensor(m), torch.tensor(m) if torch else None
    print(_row("cov (64 x 1000)", lambda: gpucore.cov(g), lambda: torch.cov(t)))
    print(_row("corrcoef (64 x 1000)", lambda: gpucore.corrcoef(g), lambda: torch.corrcoef(t)))


if __name__ == "__main__":
    main()
