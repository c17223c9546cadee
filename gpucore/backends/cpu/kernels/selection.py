"""Kernels of the data-dependent ops (gpucore/ops/selection.py): nonzero, bincount, unique.
numpy does the work for every dtype; the output sizes were read by the public functions."""

from __future__ import annotations

import numpy as np

from .common import kernel


@kernel("nonzero")
def _nonzero(out, x, count):
    np.copyto(out, np.argwhere(x).reshape(out.shape))


@kernel("bincount")
def _bincount(out, x, *weights, length):
    w = weights[0] if weights else None
    np.copyto(out, np.bincount(x, weights=w, minlength=length), casting="unsafe")


@kernel("unique")
def _unique(outs, x, dim, size):
    values, inverse, counts = outs
    if dim is None:
        v, inv, cnt = np.unique(x, return_inverse=True, return_counts=True, equal_nan=False)
    elif x.size == 0:
        return
    else:
        v, inv, cnt = np.unique(x, axis=dim, return_inverse=True, return_counts=True)
    np.copyto(values, v.reshape(values.shape))
    np.copyto(inverse, inv.reshape(inverse.shape))
    np.copyto(counts, cnt)
