"""Batch normalization kernels (gpucore/ops/norm_batch.py): native_batch_norm, which updates
the running statistics in place in training, and its backward (cpu/norm_batch.c)."""

from __future__ import annotations

import math

from .... import _cpu
from .common import _c, kernel


def _geo(x):
    return x.shape[0], x.shape[1], math.prod(x.shape[2:])


@kernel("native_batch_norm")
def _native_batch_norm(outs, x, w, b, rm, rv, training, momentum, eps, affine, running):
    out, mean, rstd = outs
    # rm / rv are written in place: they are the running tensors' own (contiguous) arrays
    _cpu.batch_norm_forward(
        _c(x).reshape(-1),
        _c(w) if affine[0] else None,
        _c(b) if affine[1] else None,
        out.reshape(-1),
        mean,
        rstd,
        rm if running[0] else None,
        rv if running[1] else None,
        *_geo(x),
        eps,
        momentum,
        training,
    )


@kernel("native_batch_norm_backward")
def _native_batch_norm_backward(outs, x, w, mean, rstd, g, training, affine, need):
    gx, gw, gb = outs
    _cpu.batch_norm_backward(
        _c(x).reshape(-1),
        _c(w) if affine[0] else None,
        _c(mean),
        _c(rstd),
        _c(g).reshape(-1),
        gx.reshape(-1) if need[0] else None,
        gw if need[1] else None,
        gb if need[2] else None,
        *_geo(x),
        training,
    )
