"""Sorting kernels (gpucore/ops/sorting.py): topk (shaders/sorting.comp), values and int64
indices in the CPU kernel's order (NaN largest, equal values in their positions' order), so
both paths give the same bits.

Each invocation ranks one element against its row, stopping at k, so a row costs about n * k
compares: rows with ``n * k`` above ``MAX_ROW_WORK`` stay on the host (eager) or are refused by
the Vulkan executor, where a sort-based kernel would be needed."""

from __future__ import annotations

import math

import numpy as np

from .... import dtypes as D
from .common import _dispatch, contiguous, copy_array, flat_local_size, groups_1d, kernel

_TYPES = {D.float32: 0, D.int32: 1, D.int64: 2, D.uint32: 3, D.uint64: 4}  # sorting.comp's TYPE
_NP_TYPES = {np.dtype(d.np): code for d, code in _TYPES.items()}
MAX_ROW_WORK = 1 << 26  # n * k per row: 64M compares (~0.1 s on lavapipe's 2 cores)


def _accepts_topk(inputs, specs):
    (x,) = inputs
    (vshape, vdt), (_, idt) = specs
    if x._dtype not in _TYPES or vdt is not x._dtype or idt is not D.int64:
        return False
    return _row_work(tuple(x.shape), tuple(vshape)) <= MAX_ROW_WORK and x.numel() < 2**31


def _row_work(shape: tuple, vshape: tuple) -> int:
    """n * k of the sorted dim: the one where the values' shape differs from the input's, or,
    when k == n, the longest (accepts() does not see the op's dim)."""
    for n, k in zip(shape, vshape):
        if n != k:
            return n * k
    return max(shape, default=1) ** 2


@kernel("topk", accepts=_accepts_topk)
def _topk(be, outs, x, k, dim, largest, shape):
    values, indices = outs
    if x.ndim == 0:
        x, values, indices = x.reshape(1), values.reshape(1), indices.reshape(1)
        dim = 0
    if values.size == 0:
        return
    n = x.shape[dim]
    outer = math.prod(x.shape[:dim])
    inner = math.prod(x.shape[dim + 1 :])
    src = contiguous(be, x)
    # the shader writes C-contiguous [outer, k, inner] outputs; others go through a copy
    v = values if values.flags.c_contiguous else be.empty_array(values.shape, values.dtype)
    i = indices if indices.flags.c_contiguous else be.empty_array(indices.shape, np.int64)
    ox, ov, oi = be.operand(src), be.operand(v), be.operand(i)
    total = outer * n * inner
    _dispatch(
        be,
        "sorting",
        (_NP_TYPES[x.dtype], bool(largest)),
        [(src, ox, False), (v, ov, True), (i, oi, True)],
        np.array([total, n, inner, k, ox.offset, ov.offset, oi.offset], np.uint32),
        groups_1d(total, flat_local_size(be)),
    )
    if v is not values:
        copy_array(be, values, v)
    if i is not indices:
        copy_array(be, indices, i)
