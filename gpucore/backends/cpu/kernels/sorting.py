"""Sorting kernels (gpucore/ops/sorting.py): sort, topk, searchsorted. numpy does the work for
every dtype; the order rule (stable, NaN greatest) is ``ops.sorting._np_argsort``'s."""

from __future__ import annotations

import numpy as np

from .common import kernel


def _argsort(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable argsort with NaN greatest (see gpucore/ops/sorting.py _np_argsort)."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    idx = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return (x.shape[axis] - 1) - np.flip(idx, axis)


@kernel("sort")
def _sort(outs, x, dim, descending, shape):
    values, indices = outs
    if x.ndim == 0:
        values[...] = x
        indices[...] = 0
        return
    idx = _argsort(x, dim, descending)
    np.copyto(indices, idx)
    np.copyto(values, np.take_along_axis(x, idx, dim))


def _topk_partitioned(x: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """The full sort's first k indices along the last dim without sorting whole rows: the k-th
    value by partition, the elements strictly before it, then as many elements equal to it as
    are missing, in index order (the stable sort's tie rule, which ONNX's TopK requires too), and
    those k sorted."""
    rows = x.reshape(-1, x.shape[-1])
    n = rows.shape[1]
    t = np.partition(rows, n - k if largest else k - 1, axis=1)[:, n - k if largest else k - 1]
    t = t[:, None]
    nan_x, nan_t = np.isnan(rows), np.isnan(t)  # NaN is the greatest value
    if largest:
        before = (rows > t) | (nan_x & ~nan_t)
    else:
        before = (rows < t) | (~nan_x & nan_t)
    tied = (rows == t) | (nan_x & nan_t)
    missing = k - before.sum(axis=1, keepdims=True)
    keep = before | (tied & (np.cumsum(tied, axis=1) <= missing))
    cand = np.nonzero(keep)[1].reshape(rows.shape[0], k)  # k per row, in index order
    order = _argsort(np.take_along_axis(rows, cand, 1), 1, largest)
    return np.take_along_axis(cand, order, 1).reshape(x.shape[:-1] + (k,))


@kernel("topk")
def _topk(outs, x, k, dim, largest, shape):
    values, indices = outs
    if x.ndim == 0:
        values[...] = x
        indices[...] = 0
        return
    n = x.shape[dim]
    if k == 0:
        return
    if 4 * k < n:
        idx = np.moveaxis(_topk_partitioned(np.moveaxis(x, dim, -1), k, largest), -1, dim)
    else:
        idx = np.take(_argsort(x, dim, largest), range(k), axis=dim)
    np.copyto(indices, idx)
    np.copyto(values, np.take_along_axis(x, idx, dim))


@kernel("searchsorted")
def _searchsorted(out, seq, values, right, out_int32):
    side = "right" if right else "left"
    if seq.ndim == 1:
        np.copyto(out, np.searchsorted(seq, values, side=side), casting="unsafe")
        return
    s2 = seq.reshape(-1, seq.shape[-1])
    v2 = values.reshape(-1, values.shape[-1])
    o2 = out.reshape(-1, out.shape[-1])
    for a, b, o in zip(s2, v2, o2):
        np.copyto(o, np.searchsorted(a, b, side=side), casting="unsafe")
