"""gpucore.special vs torch.special on 100,000 float64 values (and cov / corrcoef on 64 x 1000),
ms per call, medians of 7 calls alternating between the libraries call by call; PyTorch on one
thread (gpucore's numpy kernels use one; PyTorch's two threads stalled on this shared machine).

gpucore's special functions run as float64 kernels on the host (gpucore/backends/cpu/kernels/
bessel.py, transcendental.py, polynomials.py: i0/i0e/i1/i1e, erfcx, ndtri and entr in C,
cpu/special.c; the others numpy): this shows what that costs against PyTorch's C loops.
Run: ``python benchmarks/special.py``.
"""

from __future__ import annotations

import sys

import numpy as np
from bench_env import median_ms

import gpucore
from gpucore import special

try:
    import torch
except ImportError:
    torch = None

UNARY = ["i0", "i0e", "i1e", "modified_bessel_k0", "bessel_j0", "bessel_y1", "airy_ai"]
UNARY += ["spherical_bessel_j0", "erfcx", "ndtri", "log_ndtr", "entr"]
BINARY = ["zeta", "gammainc", "chebyshev_polynomial_t", "hermite_polynomial_h"]


def _row(label: str, g, t) -> str:
    if torch is None:
        (a,) = median_ms([g], 7)
        return f"| {label} | {a:.2f} | - | - |"
    a, b = median_ms([g, t], 7)
    return f"| {label} | {a:.2f} | {b:.2f} | {a / b:.1f} |"


def main() -> None:
    if torch is not None:
        torch.set_num_threads(1)  # gpucore's numpy kernels run on one thread too
    rng = np.random.default_rng(0)
    x = rng.uniform(0.1, 20, 100_000)
    print("| function | gpucore ms | torch ms | ratio |\n|---|---|---|---|")
    for name in UNARY:
        print(name, file=sys.stderr)
        xs = x / 21 if name == "ndtri" else x
        g, t = gpucore.tensor(xs), torch.tensor(xs) if torch else None
        gf, tf = getattr(special, name), getattr(torch.special, name) if torch else None
        print(_row(f"{name}(x)", lambda gf=gf, g=g: gf(g), lambda tf=tf, t=t: tf(t)))
    for name in BINARY:
        print(name, file=sys.stderr)
        poly = "poly" in name
        u = x / 20 if poly else x + 1.5
        v = (np.arange(x.size) % 10).astype(float) if poly else x
        gf, tf = getattr(special, name), getattr(torch.special, name) if torch else None
        ga, gb = gpucore.tensor(u), gpucore.tensor(v)
        ta, tb = (torch.tensor(u), torch.tensor(v)) if torch else (None, None)
        label = f"{name}(x, {'n' if poly else 'q'})"
        print(_row(label, lambda f=gf, a=ga, b=gb: f(a, b), lambda f=tf, a=ta, b=tb: f(a, b)))
    m = rng.normal(size=(64, 1000))
    g, t = gpucore.tensor(m), torch.tensor(m) if torch else None
    print(_row("cov (64 x 1000)", lambda: gpucore.cov(g), lambda: torch.cov(t)))
    print(_row("corrcoef (64 x 1000)", lambda: gpucore.corrcoef(g), lambda: torch.corrcoef(t)))


if __name__ == "__main__":
    main()
