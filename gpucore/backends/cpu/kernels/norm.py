"""Normalization kernels (gpucore/ops/norm.py): native_layer_norm and its backward, one C pass
per row (cpu/norm.c)."""

from __future__ import annotations

import math

import numpy as np

from .... import _cpu
from .common import _c, kernel

# Rows per partial sum of the weight / bias gradients: the blocks depend on the row count alone
# (the same bits for any thread count); fewer, larger blocks cost less scratch.
_LN_CHUNK = 64


@kernel("native_layer_norm")
def _native_layer_norm(outs, x, w, b, k, eps, affine):
    out, mean, rstd = outs
    n = math.prod(x.shape[x.ndim - k :])
    rows = x.size // n if n else 0
    _cpu.layer_norm_forward(
        _c(x).reshape(-1),
        _c(w).reshape(-1) if affine[0] else None,
        _c(b).reshape(-1) if affine[1] else None,
        out.reshape(-1),
        mean,
        rstd,
        rows,
        n,
        eps,
    )


@kernel("native_layer_norm_backward")
def _native_layer_norm_backward(outs, x, w, mean, rstd, g, k, affine, need):
    gx, gw, gb = outs
    n = math.prod(x.shape[x.ndim - k :])
    rows = x.size // n if n else 0
    part = None
    if need[1] or need[2]:
        part = np.empty(max(1, -(-rows // _LN_CHUNK) * 2 * n), np.float64)
    _cpu.layer_norm_backward(
        _c(x).reshape(-1),
        _c(w).reshape(-1) if affine[0] else None,
        _c(mean),
        _c(rstd),
        _c(g).reshape(-1),
        gx.reshape(-1) if need[0] else None,
        gw.reshape(-1) if need[1] else None,
        gb.reshape(-1) if need[2] else None,
        part,
        rows,
        n,
        _LN_CHUNK,
    )
