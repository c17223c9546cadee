"""grid_sample (forward, forward + backward) and ctc_loss (forward, forward + backward) of
gpucore.nn.functional against torch.nn.functional, float32, ms per call: medians of 15 calls
alternating between the libraries call by call, both on one thread (run with
GPUCORE_NUM_THREADS=1; PyTorch is set to one thread here), since the machine is shared.

gpucore runs both in C (cpu/grid_sample.c, cpu/ctc.c); this shows what that costs against
PyTorch's CPU kernels (its vectorized GridSamplerKernel for 4-D input, LossCTC.cpp).
Run: ``GPUCORE_NUM_THREADS=1 python benchmarks/nn_sampling.py``.
"""

from __future__ import annotations

import sys

import numpy as np
from bench_env import ratio_row

import gpucore
import gpucore.nn.functional as F

try:
    import torch
except ImportError:
    torch = None

# (input shape, output spatial, mode, padding_mode)
GRID = [
    ((8, 16, 64, 64), (64, 64), "bilinear", "zeros"),
    ((8, 16, 64, 64), (64, 64), "bilinear", "reflection"),
    ((8, 16, 64, 64), (64, 64), "nearest", "zeros"),
    ((8, 16, 64, 64), (64, 64), "bicubic", "border"),
    ((2, 8, 16, 32, 32), (16, 32, 32), "bilinear", "zeros"),
]
# (T, N, C, S)
CTC = [(50, 16, 20, 10), (200, 32, 40, 30), (400, 8, 96, 80)]


def _row(label, g, t) -> str:
    return ratio_row(label, g, t if torch is not None else None, 15, digits=2)


def _grid_calls(gx, gg, tx, tg, mode, pad):
    """(gpucore forward, torch forward, gpucore forward + backward, torch forward + backward)"""

    def g_fwd():
        with gpucore.no_grad():
            F.grid_sample(gx, gg, mode, pad, align_corners=False)

    def t_fwd():
        with torch.no_grad():
            torch.nn.functional.grid_sample(tx, tg, mode, pad, align_corners=False)

    def g_both():
        F.grid_sample(gx, gg, mode, pad, align_corners=False).sum().backward()

    def t_both():
        torch.nn.functional.grid_sample(tx, tg, mode, pad, align_corners=False).sum().backward()

    return g_fwd, t_fwd, g_both, t_both


def grid_rows() -> None:
    rng = np.random.default_rng(0)
    for shape, out, mode, pad in GRID:
        x = rng.standard_normal(shape).astype(np.float32)
        grid = rng.uniform(-1.1, 1.1, (shape[0], *out, len(out))).astype(np.float32)
        label = f"grid_sample {list(shape)} -> {list(out)} {mode} {pad}"
        print(label, file=sys.stderr)
        gx, gg = gpucore.tensor(x, requires_grad=True), gpucore.tensor(grid, requires_grad=True)
        tx = torch.tensor(x, requires_grad=True) if torch else None
        tg = torch.tensor(grid, requires_grad=True) if torch else None
        g_fwd, t_fwd, g_both, t_both = _grid_calls(gx, gg, tx, tg, mode, pad)
        print(_row(label + " forward", g_fwd, t_fwd))
        print(_row(label + " fwd + bwd", g_both, t_both))


def _ctc_calls(g, gt, tt, ttg, il, tl):
    def g_fwd():
        with gpucore.no_grad():
            F.ctc_loss(g, gt, il, tl)

    def t_fwd():
        with torch.no_grad():
            torch.nn.functional.ctc_loss(tt, ttg, il, tl)

    def g_both():
        F.ctc_loss(g, gt, il, tl).backward()

    def t_both():
        torch.nn.functional.ctc_loss(tt, ttg, il, tl).backward()

    return g_fwd, t_fwd, g_both, t_both


def ctc_rows() -> None:
    rng = np.random.default_rng(1)
    for t, n, c, s in CTC:
        logits = rng.standard_normal((t, n, c)).astype(np.float32)
        lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        targets = rng.integers(1, c, (n, s))
        tl = tuple(rng.integers(s // 2, s + 1, n).tolist())
        il = (t,) * n
        label = f"ctc_loss T{t} N{n} C{c} S{s}"
        print(label, file=sys.stderr)
        g, gt = gpucore.tensor(lp, requires_grad=True), gpucore.tensor(targets)
        tt = torch.tensor(lp, requires_grad=True) if torch else None
        ttg = torch.tensor(targets) if torch else None
        g_fwd, t_fwd, g_both, t_both = _ctc_calls(g, gt, tt, ttg, il, tl)
        print(_row(label + " forward", g_fwd, t_fwd))
        print(_row(label + " fwd + bwd", g_both, t_both))


def main() -> None:
    if torch is not None:
        torch.set_num_threads(1)
    print("| case | gpucore ms | torch ms | ratio |\n|---|---|---|---|")
    grid_rows()
    ctc_rows()


if __name__ == "__main__":
    main()
