"""Scan kernels (gpucore/ops/scan.py): cumsum, cumprod, cummax, cummin. numpy does the work for
every dtype."""

from __future__ import annotations

import numpy as np

from .common import kernel


@kernel("cumsum")
def _cumsum(out, x, dim):
    if x.ndim == 0:
        out[...] = x
    else:
        np.cumsum(x, axis=dim, out=out)


@kernel("cumprod")
def _cumprod(out, x, dim):
    if x.ndim == 0:
        out[...] = x
    else:
        np.cumprod(x, axis=dim, out=out)


def _cumext(outs, x, dim, better):
    """Running extreme along dim and its index: the last position on ties; a NaN, once met,
    stays (with its index)."""
    values, indices = outs
    if x.ndim == 0:
        values[...] = x
        indices[...] = 0
        return
    xm = np.moveaxis(x, dim, 0)
    vm, im = np.moveaxis(values, dim, 0), np.moveaxis(indices, dim, 0)
    if xm.shape[0] == 0:
        return
    best = xm[0].copy()
    at = np.zeros(best.shape, np.int64)
    vm[0], im[0] = best, at
    isfloat = x.dtype.kind == "f"
    for j in range(1, xm.shape[0]):
        v = xm[j]
        take = better(v, best)
        if isfloat:
            take = (take | np.isnan(v)) & ~np.isnan(best)
        best = np.where(take, v, best)
        at = np.where(take, j, at)
        vm[j], im[j] = best, at


@kernel("cummax")
def _cummax(outs, x, dim, shape):
    _cumext(outs, x, dim, np.greater_equal)


@kernel("cummin")
def _cummin(outs, x, dim, shape):
    _cumext(outs, x, dim, np.less_equal)


@kernel("logcumsumexp")
def _logcumsumexp(out, x, dim):
    if x.ndim == 0:
        out[...] = x
    else:
        with np.errstate(invalid="ignore"):  # -inf - -inf inside logaddexp: the result is -inf
            np.logaddexp.accumulate(x, axis=dim, out=out)
