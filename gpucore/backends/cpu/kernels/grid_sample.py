"""grid_sampler kernels (gpucore/ops/grid_sample.py): forward and backward in C
(cpu/grid_sample.c), points (forward) or images (backward) split over the thread pool."""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .common import _c, kernel


def _geom(x_shape, grid_shape):
    n, c = x_shape[:2]
    sp = tuple(x_shape[2:])
    d, h, w = (1,) + sp if len(sp) == 2 else sp
    p = int(np.prod(grid_shape[1:-1]))
    return n, c, d, h, w, p, len(sp)


@kernel("grid_sampler")
def _grid_sampler(out, x, grid, mode, padding_mode, align_corners):
    if out.size == 0:
        return
    geom = _geom(x.shape, grid.shape)
    _cpu.grid_sample(_c(x), _c(grid), out, *geom, mode, padding_mode, bool(align_corners))


@kernel("grid_sampler_backward")
def _grid_sampler_backward(outs, g, x, grid, need, mode, padding_mode, align_corners):
    gx, ggrid = outs
    gx = gx if need[0] else None
    ggrid = ggrid if need[1] else None
    if g.size == 0:  # no points or no channels: nothing flows back
        for a in (gx, ggrid):
            if a is not None:
                a[...] = 0
        return
    if gx is None and ggrid is None:
        return
    geom = _geom(x.shape, grid.shape)
    _cpu.grid_sample_backward(
        _c(g), _c(x), _c(grid), gx, ggrid, *geom, mode, padding_mode, bool(align_corners)
    )
