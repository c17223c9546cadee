"""Kernels of gpucore/ops/counting.py: histogramdd (cpu/histogram.c: one pass, each point's bin
found as PyTorch finds it, the counts or weights summed per fixed chunk of points; density
divided here) and mode_indices (rows sorted, the longest run of equal values found by running
maxima and minima of run boundaries: ties to the smallest value, its last index)."""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .common import kernel


@kernel("histogramdd")
def _histogramdd(out, x, *rest, has_weight, density, mode):
    edges = rest[: len(rest) - has_weight]
    w = np.ascontiguousarray(rest[-1], x.dtype) if has_weight else None
    if out.size == 0:
        return
    flat = np.concatenate([np.asarray(e, x.dtype) for e in edges])
    counts = np.asarray([len(e) for e in edges], np.int64)
    xs = np.ascontiguousarray(x)
    _cpu.histogram(xs.reshape(-1), x.shape[0], x.shape[1], flat, counts, w, out.reshape(-1), mode)
    if density:
        h = out.astype(np.float64)
        total = h.sum()
        widths = [np.diff(np.asarray(e, np.float64)) for e in edges]
        vol = np.ones(out.shape)
        for d, wd in enumerate(widths):
            vol = vol * wd.reshape((1,) * d + (-1,) + (1,) * (len(widths) - d - 1))
        with np.errstate(all="ignore"):
            np.copyto(out, h / (total * vol), casting="unsafe")


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
