"""Issue 14's remaining torch names, gpucore vs PyTorch side by side: ms per call, medians of 9
calls alternating between the libraries call by call, both on one thread (run with
GPUCORE_NUM_THREADS=1; PyTorch is set to one thread here). The machine is shared: ratios from
one run, not absolute speeds. Run: ``GPUCORE_NUM_THREADS=1 python benchmarks/torch_names.py``.
"""

from __future__ import annotations

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
    lam = rng.uniform(0, 30, 1_000_000).astype(np.float32)
    (g,), (t,) = _both(lam)
    _row("poisson 1M float32", lambda: gpucore.poisson(g), lambda: torch.poisson(t))
    _row("hann_window 65536", lambda: gpucore.hann_window(65536),
         lambda: torch.hann_window(65536))  # fmt: skip


if __name__ == "__main__":
    main()
