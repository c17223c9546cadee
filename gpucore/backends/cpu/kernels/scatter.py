"""Scatter kernels (gpucore/ops/scatter.py): scatter and scatter_reduce. numpy's ``ufunc.at``
does the work for every dtype."""

from __future__ import annotations

import numpy as np

from .common import _check_index, kernel


def _positions(index: np.ndarray, dim: int) -> tuple:
    grids = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    return tuple(grids)


@kernel("scatter")
def _scatter(out, x, index, src, dim):
    _check_index(index, x.shape[dim], "scatter")
    np.copyto(out, x)
    out[_positions(index, dim)] = src


_UFUNC = {
    "sum": np.add,
    "mean": np.add,
    "prod": np.multiply,
    "amax": np.maximum,
    "amin": np.minimum,
}


def _identity(dtype: np.dtype, reduce: str):
    """The value a position starts from when its own value is left out (include_self=False)."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    if dtype.kind == "b":
        return reduce == "amin"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


@kernel("scatter_reduce")
def _scatter_reduce(out, x, index, src, dim, reduce, include_self):
    _check_index(index, x.shape[dim], "scatter_reduce")
    np.copyto(out, x)
    pos = _positions(index, dim)
    if not include_self:
        out[pos] = _identity(out.dtype, reduce)
    _UFUNC[reduce].at(out, pos, src)
    if reduce == "mean":
        cnt = np.full(out.shape, 1 if include_self else 0, np.int64)
        np.add.at(cnt, pos, 1)
        cnt = np.maximum(cnt, 1)
        if out.dtype.kind in "iu":
            np.floor_divide(out, cnt, out=out, casting="unsafe")
        else:
            np.divide(out, cnt, out=out, casting="unsafe")
