"""Indexing kernels (gpucore/ops/indexing.py): advanced indexing and its backward, index_put,
gather/scatter_add, one_hot, copy_slices. numpy does the work, except gather and the row case of
index_backward (an embedding's gradient: cpu/gather.c)."""

from __future__ import annotations

import numpy as np

from .... import _cpu
from ....errors import GpucoreIndexError
from .common import _check_index, kernel


def _index_guard(fn):
    try:
        return fn()
    except IndexError as e:
        raise GpucoreIndexError(f"index out of range: {e}") from None


@kernel("index")
def _index(out, x, key, src):
    _index_guard(lambda: np.copyto(out, x[key]))


@kernel("index_backward")
def _index_backward(out, g, shape, key, basic):
    out.fill(0)
    if basic:
        out[key] = g
    elif _rows_key(key, out, g):
        # rows picked along dim 0 (embedding, index_select): the rows added in C, in order
        # (numpy's add.at's order, so its bits, at a fraction of its time)
        _cpu.index_add_rows(out, np.ascontiguousarray(key[0], np.int64), np.ascontiguousarray(g))
    else:
        np.add.at(out, key, g)


def _rows_key(key, out, g) -> bool:
    """Whether ``key`` is one 1-D integer array picking rows of the contiguous float ``out``."""
    if len(key) != 1 or out.dtype not in (np.float32, np.float64) or g.dtype != out.dtype:
        return False
    k = key[0]
    return (
        type(k) is np.ndarray
        and k.ndim == 1
        and k.dtype.kind in "iu"
        and out.ndim >= 1
        and out.flags.c_contiguous
    )


@kernel("index_put")
def _index_put(out, x, v, key, basic):
    np.copyto(out, x)
    _index_guard(lambda: out.__setitem__(key, v))


@kernel("gather")
def _gather(out, x, index, dim, src):
    if x.ndim and x.dtype.itemsize in (1, 2, 4, 8):
        try:  # any strides, no copies; the kernel checks every index as it reads it
            _cpu.gather(x, np.asarray(index, np.int64), out, dim)
        except IndexError:
            _check_index(index, x.shape[dim], "gather")  # the message with the values' range
            raise
        return
    _check_index(index, x.shape[dim], "gather")
    sl = tuple(slice(0, s) if d != dim else slice(None) for d, s in enumerate(index.shape))
    np.copyto(out, np.take_along_axis(x[sl], index, axis=dim))


@kernel("scatter_add")
def _scatter_add(out, x, index, src, dim):
    _check_index(index, x.shape[dim], "scatter_add")
    np.copyto(out, x)
    grids = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    src_part = src[tuple(slice(0, s) for s in index.shape)]
    np.add.at(out, tuple(grids), src_part)


@kernel("one_hot")
def _one_hot(out, t, num_classes):
    out.fill(0)
    np.put_along_axis(out, t[..., None].astype(np.int64), 1, axis=-1)


@kernel("copy_slices")
def _copy_slices(out, base, src, view_ops, src_shape):
    np.copyto(out, base)
    v = out
    for op, attrs in view_ops:
        v = op.view(v, **attrs)
    np.copyto(v, src)
