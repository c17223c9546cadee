"""Kernels of gpucore/ops/counting.py: histogramdd (each value's bin by a binary search of its
dim's edges, the last edge inclusive, then one weighted bincount over the flattened bin index)
and mode_indices (rows sorted, the longest run of equal values found by running maxima and
minima of run boundaries: ties to the smallest value, its last index)."""

from __future__ import annotations

import numpy as np

from .common import kernel


@kernel("histogramdd")
def _histogramdd(out, x, *rest, has_weight, density):
    edges = rest[: len(rest) - has_weight]
    w = np.asarray(rest[-1], np.float64) if has_weight else None
    keep = np.ones(x.shape[0], bool)
    pos = []
    for d, e in enumerate(edges):
        v = x[:, d]
        p = np.searchsorted(e, v, side="right") - 1
        p = np.where(v == e[-1], len(e) - 2, p)  # the last bin holds its right edge
        keep &= (v >= e[0]) & (v <= e[-1])  # NaN fails both
        pos.append(np.clip(p, 0, max(len(e) - 2, 0)))
    if out.size == 0:
        return
    flat = np.ravel_multi_index(tuple(p[keep] for p in pos), out.shape)
    h = np.bincount(flat, weights=None if w is None else w[keep], minlength=out.size)
    h = h.astype(np.float64).reshape(out.shape)
    if density:
        total = h.sum()
        widths = [np.diff(np.asarray(e, np.float64)) for e in edges]
        vol = np.ones(out.shape)
        for d, wd in enumerate(widths):
            vol = vol * wd.reshape((1,) * d + (-1,) + (1,) * (len(widths) - d - 1))
        with np.errstate(all="ignore"):
            h = h / (total * vol)
    np.copyto(out, h, casting="unsafe")


@kernel("mode_indices")
def _mode_indices(out, x, dim):
    xm = np.moveaxis(np.asarray(x), dim, -1)
    n = xm.shape[-1]
    rows = xm.reshape(-1, n)
    order = np.argsort(rows, axis=1, kind="stable")
    s = np.take_along_axis(rows, order, axis=1)
    cols = np.arange(n)
    new = np.ones(s.shape, bool)  # where a run of equal values starts (and ends, below)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    last = np.ones(s.shape, bool)
    last[:, :-1] = new[:, 1:]
    start = np.maximum.accumulate(np.where(new, cols, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, cols, n)[:, ::-1], axis=1)[:, ::-1]
    k = np.argmax(end - start, axis=1)  # the first longest run: the smallest value
    stop = end[np.arange(len(k)), k]  # its last element: the last index (stable sort)
    out.reshape(-1)[...] = order[np.arange(len(k)), stop]
