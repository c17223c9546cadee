"""Gather, GatherElements, Slice, Trilu.

Static indices become views where they can (a scalar index selects, a progression slices: no
copy, and a view runs on every executor); other static indices a constant ``index_select``
reads; tensor indices (token ids into an embedding table) go through ``gather``, negative
indices wrapped first, as ONNX allows them.
"""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import int64
from .common import gc, table

HANDLERS, handles = table()

_INT64_MAX = np.iinfo(np.int64).max


def _progression(idx: np.ndarray):
    """(start, stop, step) when the 1-D non-negative ``idx`` is start, start+step, ..."""
    if idx.ndim != 1 or idx.size == 0 or (idx < 0).any():
        return None
    if idx.size == 1:
        return int(idx[0]), int(idx[0]) + 1, 1
    step = int(idx[1] - idx[0])
    if step <= 0 or not (np.diff(idx) == step).all():
        return None
    return int(idx[0]), int(idx[-1]) + 1, step


def _wrap_negative(t, n: int):
    """Tensor indices with negative entries wrapped by ``n`` (int64)."""
    t = t.to(int64) if t.dtype is not int64 else t
    return gc.where(t < 0, t + n, t)


@handles("Gather")
def gather(ctx, node, ins):
    """Gather(data, indices, axis): data[..., indices, ...] along ``axis``."""
    data, idx = ctx.materialize(ins[0], ins[1]), ins[1]
    dims = [int(s) for s in data.shape]
    axis = ctx.axis(int(ctx.attr("axis", 0)), len(dims))
    n = dims[axis]
    out_shape = dims[:axis] + [int(s) for s in idx.shape] + dims[axis + 1 :]
    ctx.check_size(out_shape)
    if ctx.is_static(idx):
        if idx.dtype.kind not in "iu":
            raise ctx.invalid(f"indices must be integers, got {idx.dtype}")
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise ctx.invalid(f"indices out of range for axis {axis} of size {n}")
        if ctx.is_static(data):
            return np.take(data, idx, axis=axis)
        lead = (slice(None),) * axis
        if idx.ndim == 0:
            return data[lead + (int(idx),)]  # a select view (negative indices kept as such)
        wrapped = np.where(idx < 0, idx + n, idx).astype(np.int64)
        prog = _progression(wrapped.reshape(-1)) if idx.ndim == 1 else None
        if prog is not None:
            return data[lead + (slice(*prog),)]
        flat = data.index_select(axis, ctx.tensor(wrapped.reshape(-1)))
        return flat.reshape(*out_shape)
    # tensor indices: gather over a [P, n, Q] view with the indices broadcast to [P, m, Q].
    # Not index_select, whose capture bakes the traced index values into the graph.
    t = ctx.tensor(data)
    pre, post = math.prod(dims[:axis]), math.prod(dims[axis + 1 :])
    m = math.prod(int(s) for s in idx.shape)
    index = _wrap_negative(idx, n).reshape(1, m, 1).expand(pre, m, post)
    return gc.gather(t.reshape(pre, n, post), 1, index).reshape(*out_shape)


@handles("GatherElements")
def gather_elements(ctx, node, ins):
    """GatherElements(data, indices, axis): torch.gather."""
    data, idx = ins
    rank = len(data.shape)
    axis = ctx.axis(int(ctx.attr("axis", 0)), rank)
    n = int(data.shape[axis])
    if ctx.is_static(data) and ctx.is_static(idx):
        return np.take_along_axis(data, np.where(idx < 0, idx + n, idx), axis=axis)
    if ctx.is_static(idx):
        index = ctx.tensor(np.where(idx < 0, idx + n, idx).astype(np.int64))
    else:
        index = _wrap_negative(idx, n)
    return gc.gather(ctx.tensor(data), axis, index)


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


@handles("Slice")
def slice_(ctx, node, ins):
    """Slice(data, starts, ends, axes, steps) (attributes before opset 10), ONNX's clamping:
    a view of the tensor."""
    x = ctx.materialize(ins[0], *ins[1:])
    dims = [int(s) for s in x.shape]
    if ctx.opset < 10:
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        axes, steps = ctx.attr("axes", None), None
    else:
        starts, ends = ctx.ints(ins[1], "starts"), ctx.ints(ins[2], "ends")
        axes = ctx.ints(ins[3], "axes") if len(ins) > 3 and ins[3] is not None else None
        steps = ctx.ints(ins[4], "steps") if len(ins) > 4 and ins[4] is not None else None
    axes = list(range(len(starts))) if axes is None else [ctx.axis(a, len(dims)) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps) or len(set(axes)) != len(axes):
        raise ctx.invalid(f"starts {starts}, ends {ends}, axes {axes}, steps {steps} differ")
    key = [slice(None)] * len(dims)
    for s, e, a, st in zip(starts, ends, axes, steps):
        n = dims[a]
        if st == 0:
            raise ctx.invalid("a step is 0")
        s = s + n if s < 0 else s
        e = e + n if e < 0 else e
        if st > 0:
            s, e = _clamp(s, 0, n), _clamp(e, 0, n)
            # an end at or past the size is open: the view then does not depend on the size
            key[a] = slice(s or None, None if e >= n else e, None if st == 1 else st)
        elif n == 0:
            key[a] = slice(0, 0)
        else:  # a negative step: the start clamps to [0, n-1], the end to [-1, n-1]
            s, e = _clamp(s, 0, n - 1), _clamp(e, -1, n - 1)
            key[a] = slice(s, None if e < 0 else e, st)
    if all(k == slice(None) for k in key):
        return x
    return x[tuple(key)]


@handles("Trilu")
def trilu(ctx, node, ins):
    """Trilu(input, k; upper): the upper (or lower) triangle of the last two dims, from
    diagonal k."""
    x = ins[0]
    k = ctx.ints(ins[1], "k")[0] if len(ins) > 1 and ins[1] is not None else 0
    upper = bool(ctx.attr("upper", 1))
    rows, cols = (int(s) for s in x.shape[-2:])
    keep = (
        np.triu(np.ones((rows, cols), np.bool_), k)
        if upper
        else np.tril(np.ones((rows, cols), np.bool_), k)
    )
    if ctx.is_static(x):
        return np.where(keep, x, np.zeros((), x.dtype))
    zero = ctx.tensor(np.zeros((), x.dtype.np))
    return gc.where(ctx.tensor(keep), x, zero)


def _index(ctx, idx, n: int):
    """Indices (static or a tensor) as an int64 tensor, negative ones wrapped by ``n``."""
    if ctx.is_static(idx):
        return ctx.tensor(np.where(idx < 0, idx + n, idx).astype(np.int64))
    return _wrap_negative(idx, n)


_REDUCTIONS = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


@handles("ScatterElements", "Scatter")
def scatter_elements(ctx, node, ins):
    """ScatterElements(data, indices, updates; axis, reduction): torch.scatter(_reduce)."""
    data, idx, updates = ctx.tensor(ins[0]), ins[1], ctx.tensor(ins[2])
    axis = ctx.axis(int(ctx.attr("axis", 0)), data.ndim)
    reduction = ctx.attr("reduction", "none")
    index = _index(ctx, idx, int(data.shape[axis]))
    if reduction == "none":
        return gc.scatter(data, axis, index, updates)
    if reduction not in _REDUCTIONS:
        raise ctx.unsupported(f"reduction={reduction!r}", attribute="reduction")
    return gc.scatter_reduce(data, axis, index, updates, _REDUCTIONS[reduction])


def _flat_index(ctx, idx, dims: list):
    """ND indices [..., K] into ``dims`` as flat int64 indices [...] into prod(dims[:K])."""
    k = int(idx.shape[-1])
    if not 1 <= k <= len(dims):
        raise ctx.invalid(
            f"indices {list(idx.shape)}: the last dim must be 1..{len(dims)} for data dims {dims}"
        )
    strides = np.array([math.prod(dims[i + 1 : k]) for i in range(k)], np.int64)
    if ctx.is_static(idx):
        wrapped = np.where(idx < 0, idx + np.array(dims[:k]), idx).astype(np.int64)
        return ctx.tensor((wrapped * strides).sum(-1))
    t = idx.to(int64) if idx.dtype is not int64 else idx
    t = gc.where(t < 0, t + ctx.tensor(np.array(dims[:k], np.int64)), t)
    # K (at most the data's rank) products added one by one rather than .sum(-1): int64 adds
    # and products have Vulkan shaders, int64 reductions do not
    lin = None
    for j in range(k):
        term = t[..., j] if strides[j] == 1 else t[..., j] * int(strides[j])
        lin = term if lin is None else lin + term
    return lin


@handles("GatherND")
def gather_nd(ctx, node, ins):
    """GatherND(data, indices; batch_dims): data[tuple(indices[..., :])], per index of the
    first ``batch_dims`` dims (shared by data and indices)."""
    data, idx = ctx.tensor(ins[0]), ins[1]
    b = int(ctx.attr("batch_dims", 0))
    dims = [int(s) for s in data.shape]
    k = int(idx.shape[-1])
    if not 0 <= b < min(len(dims), len(idx.shape)) or b + k > len(dims):
        raise ctx.invalid(f"batch_dims {b} for data {dims} and indices {list(idx.shape)}")
    if [int(s) for s in idx.shape[:b]] != dims[:b]:
        raise ctx.invalid(f"indices {list(idx.shape)} and data {dims} differ in the batch dims")
    batch, inner = math.prod(dims[:b]), math.prod(dims[b : b + k])
    flat = data.reshape(batch * inner, *dims[b + k :])
    lin = _flat_index(ctx, idx, dims[b:])  # within each batch index
    if b:  # then past the earlier batch indices' blocks
        offsets = np.arange(batch, dtype=np.int64).reshape(batch, 1) * inner
        lin = lin.reshape(batch, -1) + ctx.tensor(offsets)
    out = gc.index_select(flat, 0, lin.reshape(-1))
    return out.reshape(*[int(s) for s in idx.shape[:-1]], *dims[b + k :])


@handles("ScatterND")
def scatter_nd(ctx, node, ins):
    """ScatterND(data, indices, updates; reduction): data[indices[..., :]] = updates."""
    data, idx, updates = ctx.tensor(ins[0]), ins[1], ctx.tensor(ins[2])
    reduction = ctx.attr("reduction", "none")
    dims = [int(s) for s in data.shape]
    k = int(idx.shape[-1])
    rest = dims[k:]
    flat = data.reshape(math.prod(dims[:k]), *rest)
    lin = _flat_index(ctx, idx, dims).reshape(-1)
    src = updates.reshape(-1, *rest)
    if reduction == "none":
        out = gc.index_copy(flat, 0, lin, src)
    elif reduction == "add":
        out = gc.index_add(flat, 0, lin, src)
    elif reduction in _REDUCTIONS:
        index = lin.reshape(-1, *([1] * len(rest))).expand(*src.shape)
        out = gc.scatter_reduce(flat, 0, index, src, _REDUCTIONS[reduction])
    else:
        raise ctx.unsupported(f"reduction={reduction!r}", attribute="reduction")
    return out.reshape(*dims)


@handles("OneHot")
def one_hot(ctx, node, ins):
    """OneHot(indices, depth, values[off, on]; axis): negative indices count from depth."""
    idx = ins[0]
    depth = int(ctx.static(ins[1], "depth").reshape(-1)[0])
    values = ctx.tensor(ins[2])
    rank = len(idx.shape) + 1
    axis = ctx.axis(int(ctx.attr("axis", -1)), rank)
    t = ctx.tensor(idx)
    t = t.to(int64) if t.dtype is not int64 else t  # (float indices truncate)
    t = gc.where(t < 0, t + depth, t).unsqueeze(axis)
    where = [1] * rank
    where[axis] = depth
    hot = t == ctx.tensor(np.arange(depth, dtype=np.int64).reshape(where))
    return gc.where(hot, values[1], values[0])
