"""Scatter kernels (gpucore/ops/scatter.py, gpucore/ops/indexing.py): scatter, scatter_add and
scatter_reduce (sum, prod, amax, amin, mean; include_self either way) as shaders/scatter.comp.

Each output element gathers what the index sends it, in the index's order, so results are the
CPU kernel's bits (same rounding order for sums and products, the last write for a plain
scatter) and deterministic, with no atomics. That costs each element a walk along the index's
scattered dim: fine for the usual shapes (backward of gather / topk / sort, ONNX's Scatter*),
slow for an index much longer than the output along dim: above ``MAX_WORK`` (output elements
times the index's length along dim) the op stays on the host (eager) or is refused by the
Vulkan executor.

scatter moves any 4- or 8-byte items; the reductions take float32."""

from __future__ import annotations

import numpy as np

from .... import dtypes as D
from .common import _dispatch, contiguous, copy_array, flat_local_size, groups_1d, kernel
from .indexing import check_host_index, note_host_index

# scatter.comp's MODE
_MODES = {"scatter": 0, "sum": 1, "prod": 2, "amax": 3, "amin": 4, "mean": 5}
MAX_WORK = 1 << 28


def _accepts(float_only: bool):
    def accepts(inputs, specs):
        x, index, src = inputs
        shape, dt = specs
        if index._dtype is not D.int64 or not hasattr(src, "_dtype") or src._dtype is not dt:
            return False
        if dt is not x._dtype or x.ndim > 8:
            return False
        # the walk is index.shape[dim]; accepts() does not see dim, so bound it by the longest
        if x.numel() * max(index.shape, default=1) > MAX_WORK:
            return False
        ok = dt is D.float32 if float_only else dt.itemsize in (4, 8)
        if ok:
            note_host_index(index)
        return ok

    return accepts


def _run(be, out, x, index, src, dim, op: str, mode: str, include_self: bool = True):
    check_host_index(index, x.shape[dim] if x.ndim else 1, op)
    y = out if out.flags.c_contiguous else be.empty_array(out.shape, out.dtype)
    copy_array(be, y, x)
    if index.size:
        if x.ndim == 0:
            y1, index, src, dim = y.reshape(1), index.reshape(1), src.reshape(1), 0
        else:
            y1 = y
        idx = contiguous(be, index)
        s = contiguous(be, src[tuple(slice(0, n) for n in index.shape)])
        oy, oi, os_ = be.operand(y1), be.operand(idx), be.operand(s)
        nd = y1.ndim
        push = np.zeros(22, np.uint32)
        push[:6] = [y1.size, nd, dim, oy.offset, oi.offset, os_.offset]
        push[6 : 6 + nd] = y1.shape
        push[14 : 14 + nd] = idx.shape
        _dispatch(
            be,
            "scatter",
            (_MODES[mode], y1.itemsize // 4, bool(include_self)),
            [(idx, oi, False), (s, os_, False), (y1, oy, True)],
            push,
            groups_1d(y1.size, flat_local_size(be)),
        )
    if y is not out:
        copy_array(be, out, y)


@kernel("scatter", accepts=_accepts(float_only=False))
def _scatter(be, out, x, index, src, dim):
    _run(be, out, x, index, src, dim, "scatter", "scatter")


@kernel("scatter_add", accepts=_accepts(float_only=True))
def _scatter_add(be, out, x, index, src, dim):
    _run(be, out, x, index, src, dim, "scatter_add", "sum")


@kernel("scatter_reduce", accepts=_accepts(float_only=True))
def _scatter_reduce(be, out, x, index, src, dim, reduce, include_self):
    _run(be, out, x, index, src, dim, "scatter_reduce", reduce, include_self)
