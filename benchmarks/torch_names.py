"""Issue 14's remaining torch names, gpucore vs PyTorch side by side: ms per call, medians of 9
calls alternating between the libraries call by call, both on one thread (run with
GPUCORE_NUM_THREADS=1; PyTorch is set to one thread here). The machine is shared: ratios from
one run, not absolute speeds. Run: ``GPUCORE_NUM_THREADS=1 python benchmarks/torch_names.py``.
"""

from __future__ import annotations

import warnings

import numpy as np
from bench_env import ratio_row

import gpucore

try:
    import torch
except ImportError:
    torch = None


def _row(label: str, g, t) -> None:
    print(ratio_row(label, g, t if torch is not None else None, 9))


def _both(*arrays):
    gs = [gpucore.tensor(a) for a in arrays]
    ts = [torch.from_numpy(a) for a in arrays] if torch else [None] * len(arrays)
    return gs, ts


def main() -> None:
    if torch is not None:
        torch.set_num_threads(1)
        warnings.filterwarnings("ignore", message=".*triangular_solve is deprecated")
    rng = np.random.default_rng(0)
    print("| call | gpucore ms | torch ms | ratio |\n|---|---|---|---|")
    x = rng.standard_normal(1_000_000).astype(np.float32)
    (g,), (t,) = _both(x)
    _row("histogram 1M float32, 100 bins", lambda: gpucore.histogram(g, 100),
         lambda: torch.histogram(t, 100))  # fmt: skip
    p = rng.standard_normal((200_000, 3)).astype(np.float32)
    (g,), (t,) = _both(p)
    _row("histogramdd 200k x 3, 16 bins", lambda: gpucore.histogramdd(g, 16),
         lambda: torch.histogramdd(t, [16, 16, 16]))  # fmt: skip
    a, b = rng.integers(-(10**6), 10**6, (2, 1_000_000))
    (ga, gb), (ta, tb) = _both(a, b)
    _row("gcd 1M int64", lambda: gpucore.gcd(ga, gb), lambda: torch.gcd(ta, tb))
    m = rng.integers(0, 20, (1000, 100)).astype(np.float32)
    (g,), (t,) = _both(m)
    _row("mode 1000 x 100 float32, dim 1", lambda: gpucore.mode(g, 1), lambda: torch.mode(t, 1))
    f = rng.standard_normal((500, 500))
    (g,), (t,) = _both(f)
    _row("frexp 500 x 500 float64", lambda: gpucore.frexp(g), lambda: torch.frexp(t))
    _row("gradient 500 x 500 float64", lambda: gpucore.gradient(g), lambda: torch.gradient(t))
    A = np.tril(rng.standard_normal((256, 256))) + 16 * np.eye(256)
    B = rng.standard_normal((256, 64))
    (ga, gb), (ta, tb) = _both(A, B)
    _row("linalg.solve_triangular 256 x 256, 64 rhs, float64",
         lambda: gpucore.linalg.solve_triangular(ga, gb, upper=False),
         lambda: torch.linalg.solve_triangular(ta, tb, upper=False))  # fmt: skip
    _solver_rows(rng)
    _histogram_rows(rng)
    _gelu_rows(rng)
    lam = rng.uniform(0, 30, 1_000_000).astype(np.float32)
    (g,), (t,) = _both(lam)
    _row("poisson 1M float32", lambda: gpucore.poisson(g), lambda: torch.poisson(t))
    _row("hann_window 65536", lambda: gpucore.hann_window(65536),
         lambda: torch.hann_window(65536))  # fmt: skip


def _solver_rows(rng) -> None:
    """Triangular and Cholesky solves, the LU info codes of inv_ex / solve_ex."""
    A = np.triu(rng.standard_normal((256, 256))).astype(np.float32) + 16 * np.eye(256, dtype="f")
    B = rng.standard_normal((64, 256)).astype(np.float32)
    (ga, gb), (ta, tb) = _both(A, B)
    _row("linalg.solve_triangular 256 x 256, 64 rhs, float32, upper, left=False",
         lambda: gpucore.linalg.solve_triangular(ga, gb, upper=True, left=False),
         lambda: torch.linalg.solve_triangular(ta, tb, upper=True, left=False))  # fmt: skip
    A = np.tril(rng.standard_normal((64, 32, 32))) + 8 * np.eye(32)
    B = rng.standard_normal((64, 32, 8))
    (ga, gb), (ta, tb) = _both(A, B)
    _row("linalg.solve_triangular batch 64 x 32 x 32, 8 rhs, float64",
         lambda: gpucore.linalg.solve_triangular(ga, gb, upper=False),
         lambda: torch.linalg.solve_triangular(ta, tb, upper=False))  # fmt: skip
    _row("triangular_solve batch 64 x 32 x 32, transpose, float64",
         lambda: gpucore.triangular_solve(gb, ga, upper=False, transpose=True),
         lambda: torch.triangular_solve(tb, ta, upper=False, transpose=True))  # fmt: skip
    L = np.tril(rng.standard_normal((256, 256))) + 16 * np.eye(256)
    B = rng.standard_normal((256, 64))
    (gl, gb), (tl, tb) = _both(L, B)
    _row("cholesky_solve 256 x 256, 64 rhs, float64",
         lambda: gpucore.cholesky_solve(gb, gl), lambda: torch.cholesky_solve(tb, tl))  # fmt: skip
    M = rng.standard_normal((256, 256))
    (gm, gb), (tm, tb) = _both(M, B)
    _row("linalg.inv_ex 256 x 256 float64", lambda: gpucore.linalg.inv_ex(gm),
         lambda: torch.linalg.inv_ex(tm))  # fmt: skip
    _row("linalg.solve_ex 256 x 256, 64 rhs, float64", lambda: gpucore.linalg.solve_ex(gm, gb),
         lambda: torch.linalg.solve_ex(tm, tb))  # fmt: skip
    M = rng.standard_normal((256, 16, 16)).astype(np.float32)
    (gm,), (tm,) = _both(M)
    _row("linalg.inv_ex batch 256 x 16 x 16 float32", lambda: gpucore.linalg.inv_ex(gm),
         lambda: torch.linalg.inv_ex(tm))  # fmt: skip


def _histogram_rows(rng) -> None:
    """histc and weighted / edge-tensor histograms."""
    x = rng.standard_normal(1_000_000).astype(np.float32)
    w = rng.uniform(0, 1, 1_000_000).astype(np.float32)
    e = np.sort(rng.standard_normal(33)).astype(np.float32)
    (g, gw, ge), (t, tw, te) = _both(x, w, e)
    _row("histc 1M float32, 100 bins", lambda: gpucore.histc(g, 100),
         lambda: torch.histc(t, 100))  # fmt: skip
    _row("histogram 1M float32, 100 bins, weights, range", lambda: gpucore.histogram(
        g, 100, range=(-2.0, 2.0), weight=gw), lambda: torch.histogram(
        t, 100, range=(-2.0, 2.0), weight=tw))  # fmt: skip
    _row("histogram 1M float32, 32 bins from an edge tensor", lambda: gpucore.histogram(g, ge),
         lambda: torch.histogram(t, te))  # fmt: skip


def _gelu_rows(rng) -> None:
    """F.gelu (erf form) forward + backward: the backward's polynomial / one-exp erfc form."""
    for label, x in (("N(0, 1)", rng.standard_normal(1_000_000)),
                     ("U(-1, 1)", rng.uniform(-1, 1, 1_000_000))):  # fmt: skip
        x = x.astype(np.float32)
        g = gpucore.tensor(x, requires_grad=True)
        t = torch.tensor(x, requires_grad=True) if torch is not None else None
        _row(f"F.gelu forward + backward 1M float32, x ~ {label}",
             lambda g=g: gpucore.nn.functional.gelu(g).sum().backward(),
             lambda t=t: torch.nn.functional.gelu(t).sum().backward())  # fmt: skip


if __name__ == "__main__":
    main()
