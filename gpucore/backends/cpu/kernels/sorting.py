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
        # partition first: the k candidates, then sort those (ties at the k-th value may pick
        # any of the tied elements, as PyTorch's topk)
        part = np.argpartition(x, n - k if largest else k - 1, axis=dim)
        cand = np.take(part, range(n - k, n) if largest else range(k), axis=dim)
        # sort the candidates by value, then by index (the full sort's tie order)
        cand = np.sort(cand, axis=dim)
        vals = np.take_along_axis(x, cand, dim)
        order = _argsort(vals, dim, largest)
        idx = np.take_along_axis(cand, order, dim)
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
