"""Normalization kernels (gpucore/ops/norm.py): native_layer_norm, native_rms_norm and
native_group_norm with their backward ops, one C pass per row (cpu/norm.c)."""

from __future__ import annotations

import math

import numpy as np

from .... import _cpu
from .common import _c, kernel

# Rows per partial sum of the weight / bias gradients: the blocks depend on the row count alone
# (the same bits for any thread count); fewer, larger blocks cost less scratch. The fast lane
# (cpu/python/fastpath.c FAST_NORM_CHUNK) uses the same.
_CHUNK = 64


def _flat(a, used=True):
    return _c(a).reshape(-1) if used else None


def _forward(outs, x, w, b, geo, eps, affine, rms):
    rows, groups, cg, inner = geo
    out, *stats = outs
    mean, rstd = (None, stats[0]) if rms else stats
    _cpu.norm_rows_forward(
        _flat(x),
        _flat(w, affine[0]),
        _flat(b, not rms and affine[1]),
        out.reshape(-1),
        mean,
        rstd,
        rows,
        groups,
        cg,
        inner,
        eps,
        rms,
    )


def _backward(outs, x, w, mean, rstd, g, geo, affine, need, rms):
    rows, groups, cg, inner = geo
    gx, gw, *gb = outs
    gb = gb[0] if gb else None
    part = None
    if need[1] or (not rms and need[2]):
        part = np.empty(max(1, -(-rows // _CHUNK) * 2 * groups * cg), np.float64)
    _cpu.norm_rows_backward(
        _flat(x),
        _flat(w, affine[0]),
        None if rms else _c(mean),
        _c(rstd),
        _flat(g),
        gx.reshape(-1) if need[0] else None,
        gw.reshape(-1) if need[1] else None,
        gb.reshape(-1) if gb is not None and need[2] else None,
        part,
        rows,
        groups,
        cg,
        inner,
        _CHUNK,
        rms,
    )


def _lead(x, k):
    n = math.prod(x.shape[x.ndim - k :])
    return (x.size // n if n else 0, 1, n, 1)


def _grouped(x, groups):
    n, c = x.shape[0], x.shape[1]
    return (n * groups, groups, c // groups, math.prod(x.shape[2:]))


@kernel("native_layer_norm")
def _native_layer_norm(outs, x, w, b, k, eps, affine):
    _forward(outs, x, w, b, _lead(x, k), eps, affine, False)


@kernel("native_layer_norm_backward")
def _native_layer_norm_backward(outs, x, w, mean, rstd, g, k, affine, need):
    _backward(outs, x, w, mean, rstd, g, _lead(x, k), affine, need, False)


@kernel("native_rms_norm")
def _native_rms_norm(outs, x, w, k, eps, affine):
    _forward(outs, x, w, None, _lead(x, k), eps, (affine, False), True)


@kernel("native_rms_norm_backward")
def _native_rms_norm_backward(outs, x, w, rstd, g, k, affine, need):
    _backward(outs, x, w, None, rstd, g, _lead(x, k), (affine, False), need, True)


@kernel("native_group_norm")
def _native_group_norm(outs, x, w, b, groups, eps, affine):
    _forward(outs, x, w, b, _grouped(x, groups), eps, affine, False)


@kernel("native_group_norm_backward")
def _native_group_norm_backward(outs, x, w, mean, rstd, g, groups, affine, need):
    _backward(outs, x, w, mean, rstd, g, _grouped(x, groups), affine, need, False)
