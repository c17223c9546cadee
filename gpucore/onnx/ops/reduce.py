"""Reductions: ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd (static only) ReduceL1 ReduceL2
ReduceSumSquare ReduceLogSum ReduceLogSumExp, ArgMax / ArgMin, CumSum.

Axes come as an input (ReduceSum since opset 13, the others since 18) or an attribute (before);
no axes reduce everything unless ``noop_with_empty_axes``.
"""

from __future__ import annotations

import numpy as np

from .common import axes_input, gc, normalize_axes, table

HANDLERS, handles = table()

_NUMPY = {
    "ReduceSum": lambda x, a, k: np.sum(x, axis=a, keepdims=k),
    "ReduceMean": lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    "ReduceMax": lambda x, a, k: np.max(x, axis=a, keepdims=k),
    "ReduceMin": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "ReduceProd": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k)),
    "ReduceSumSquare": lambda x, a, k: np.sum(x * x, axis=a, keepdims=k),
    "ReduceLogSum": lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)),
    "ReduceLogSumExp": lambda x, a, k: np.log(np.sum(np.exp(x), axis=a, keepdims=k)),
}

_GPUCORE = {
    "ReduceSum": lambda x, a, k: x.sum(dim=a, keepdim=k),
    "ReduceMean": lambda x, a, k: x.mean(dim=a, keepdim=k),
    "ReduceMax": lambda x, a, k: x.amax(dim=a, keepdim=k),
    "ReduceMin": lambda x, a, k: x.amin(dim=a, keepdim=k),
    "ReduceL1": lambda x, a, k: x.abs().sum(dim=a, keepdim=k),
    "ReduceL2": lambda x, a, k: (x * x).sum(dim=a, keepdim=k).sqrt(),
    "ReduceSumSquare": lambda x, a, k: (x * x).sum(dim=a, keepdim=k),
    "ReduceLogSum": lambda x, a, k: x.sum(dim=a, keepdim=k).log(),
    "ReduceLogSumExp": lambda x, a, k: gc.logsumexp(x, a, k),
}


@handles(*_NUMPY)
def reduce(ctx, node, ins):
    """The Reduce* ops."""
    x = ins[0]
    rank = len(x.shape)
    keep = bool(ctx.attr("keepdims", 1))
    noop = bool(ctx.attr("noop_with_empty_axes", 0))
    axes = axes_input(ctx, ins, 1)
    if not axes:
        if noop:
            return x
        axes = list(range(rank))
    axes = tuple(normalize_axes(ctx, axes, rank))
    if ctx.is_static(x):
        out = np.asarray(_NUMPY[node.op_type](x, axes, keep))
        return out.astype(x.dtype)
    if not axes:  # a 0-d input: nothing to reduce
        return x
    dims = [int(s) for s in x.shape]
    if any(dims[a] == 0 for a in axes):  # an empty set: the reduction's identity
        shape = [1 if i in axes else d for i, d in enumerate(dims) if keep or i not in axes]
        return np.full(shape, _identity(node.op_type, x.dtype.np), x.dtype.np)
    if node.op_type == "ReduceProd":
        return _prod(x, axes, keep)
    return _GPUCORE[node.op_type](x, axes, keep)


_EMPTY = {"ReduceMax": -np.inf, "ReduceMin": np.inf, "ReduceProd": 1.0}
_EMPTY.update(ReduceLogSum=-np.inf, ReduceLogSumExp=-np.inf)


def _identity(op: str, dtype):
    """What ``op`` gives for an empty set, in ``dtype`` (integers: their extremes)."""
    v = _EMPTY.get(op, 0.0)
    if np.dtype(dtype).kind in "iub" and np.isinf(v):
        info = np.iinfo(dtype) if np.dtype(dtype).kind != "b" else None
        return (info.min if v < 0 else info.max) if info else v > 0
    return v


def _prod(x, axes: tuple, keep: bool):
    """The product over ``axes``: the last entry of a cumulative product over them flattened
    into one trailing dim."""
    rank = x.ndim
    rest = [d for d in range(rank) if d not in axes]
    moved = x.permute(*rest, *axes) if list(rest) + list(axes) != list(range(rank)) else x
    kept = [int(x.shape[d]) for d in rest]
    flat = moved.reshape(*kept, -1)
    out = gc.cumprod(flat, -1)[..., -1]
    if keep:
        out = out.reshape(*[1 if d in axes else int(x.shape[d]) for d in range(rank)])
    return out


@handles("ArgMax", "ArgMin")
def argmax(ctx, node, ins):
    """ArgMax / ArgMin(axis, keepdims): the first extreme index (int64)."""
    x = ins[0]
    rank = len(x.shape)
    axis = ctx.axis(int(ctx.attr("axis", 0)), rank)
    keep = bool(ctx.attr("keepdims", 1))
    last = bool(ctx.attr("select_last_index", 0))
    arg = np.argmax if node.op_type == "ArgMax" else np.argmin
    if ctx.is_static(x):
        if last:
            flipped = np.flip(x, axis)
            out = x.shape[axis] - 1 - arg(flipped, axis=axis)
        else:
            out = arg(x, axis=axis)
        out = out.astype(np.int64)
        return np.expand_dims(out, axis) if keep else out
    t = ctx.tensor(x)
    if last:  # the first extreme of the flipped input, counted from the end
        t = gc.flip(t, (axis,))
    out = (
        t.argmax(dim=axis, keepdim=keep)
        if node.op_type == "ArgMax"
        else t.argmin(dim=axis, keepdim=keep)
    )
    return (int(x.shape[axis]) - 1) - out if last else out


@handles("CumSum")
def cumsum(ctx, node, ins):
    """CumSum(x, axis; exclusive, reverse): gpucore's sequential scan in x's dtype (integers
    wrap as ONNX Runtime's), the exclusive form shifted by one position (x's own value is never
    added and taken away again, which would round floats differently)."""
    return _scan(ctx, ins, gc.cumsum, 0)


@handles("CumProd")
def cumprod(ctx, node, ins):
    """CumProd(x, axis; exclusive, reverse) (opset 26)."""
    return _scan(ctx, ins, gc.cumprod, 1)


def _scan(ctx, ins, op, identity: int):
    x = ctx.tensor(ins[0])
    axis = ctx.axis(ctx.ints(ins[1], "axis")[0], x.ndim)
    exclusive, reverse = bool(ctx.attr("exclusive", 0)), bool(ctx.attr("reverse", 0))
    y = gc.flip(x, (axis,)) if reverse else x
    out = op(y, axis, dtype=x.dtype)  # (integers would widen to int64)
    n = int(x.shape[axis])
    if exclusive and n:  # the identity first, the results shifted along
        first = [1 if d == axis else int(s) for d, s in enumerate(x.shape)]
        start = ctx.tensor(np.full(first, identity, x.dtype.np))
        out = gc.cat([start, out.narrow(axis, 0, n - 1)], axis)
    return gc.flip(out, (axis,)) if reverse else out


@handles("TopK")
def topk(ctx, node, ins):
    """TopK(X, K; axis, largest, sorted) -> Values, Indices (int64)."""
    x = ctx.tensor(ins[0])
    k = ctx.ints(ins[1], "K")[0] if len(ins) > 1 else int(ctx.attr("k"))
    axis = ctx.axis(int(ctx.attr("axis", -1)), x.ndim)
    largest = bool(ctx.attr("largest", 1))
    ctx.attr("sorted", 1)  # sorted output is one valid order for sorted=0 too
    if not 0 <= k <= int(x.shape[axis]):
        raise ctx.invalid(f"K={k} for axis {axis} of size {int(x.shape[axis])}")
    values, indices = gc.topk(x, k, dim=axis, largest=largest, sorted=True)
    return [values, indices]
