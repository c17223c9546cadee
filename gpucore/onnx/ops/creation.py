"""Values known at load time: Constant, ConstantOfShape, Range, Shape, Size, EyeLike.

Shape of a traced tensor is static too: its entries are the sizes of this trace, which the
runtime's multi-size tracing turns into symbolic sizes wherever they end up as op attributes.
"""

from __future__ import annotations

import numpy as np

from ..proto import NUMPY_TYPES
from .common import table

HANDLERS, handles = table()

_CONSTANT_ATTRS = ("value", "value_float", "value_floats", "value_int", "value_ints")
_NUMPY = {
    "value_float": np.float32,
    "value_floats": np.float32,
    "value_int": np.int64,
    "value_ints": np.int64,
}


@handles("Constant")
def constant(ctx, node, ins):
    """Constant: exactly one of value / value_float(s) / value_int(s)."""
    given = list(node.attrs)
    if len(given) != 1:
        raise ctx.invalid(f"a Constant needs exactly one value attribute, got {given}")
    name = given[0]
    if name not in _CONSTANT_ATTRS:
        raise ctx.unsupported(f"a Constant given by {name!r}", attribute=name)
    value = ctx.attr(name)
    if name == "value":
        return value
    return np.asarray(value, dtype=_NUMPY[name])


@handles("ConstantOfShape")
def constant_of_shape(ctx, node, ins):
    """ConstantOfShape(shape; value: a one-element tensor, default float32 0)."""
    shape = ctx.check_size(ctx.ints(ins[0], "input"))
    value = ctx.attr("value", None)
    if value is None:
        value = np.zeros(1, np.float32)
    if value.size != 1:
        raise ctx.invalid(f"value must hold one element, got shape {value.shape}")
    if ctx.size_dependent(ins[0]):  # a view of one element: one graph for every size
        one = ctx.tensor(np.require(value.reshape((1,) * len(shape)), requirements="C"))
        return one.expand(*shape) if shape else one.reshape(())
    return np.full(shape, value.reshape(-1)[0], dtype=value.dtype)


@handles("Range")
def range_(ctx, node, ins):
    """Range(start, limit, delta): max(ceil((limit - start) / delta), 0) elements."""
    start, limit, delta = (ctx.static(v, n) for v, n in zip(ins, ("start", "limit", "delta")))
    if any(v.size != 1 for v in (start, limit, delta)):
        raise ctx.invalid("start, limit and delta must be scalars")
    s, lim, d = (v.reshape(-1)[0].item() for v in (start, limit, delta))
    if d == 0:
        raise ctx.invalid("delta is 0")
    n = max(int(np.ceil((lim - s) / d)), 0)
    ctx.check_size((n,))
    return (s + np.arange(n, dtype=np.float64 if start.dtype.kind == "f" else np.int64) * d).astype(
        start.dtype
    )


@handles("Shape")
def shape(ctx, node, ins):
    """Shape(start, end) (start and end since opset 15)."""
    dims = [int(s) for s in ins[0].shape]
    start, end = ctx.attr("start", 0), ctx.attr("end", None)
    return np.array(dims[slice(start, end)], dtype=np.int64)


@handles("Size")
def size(ctx, node, ins):
    """Size: the element count."""
    return np.array(int(np.prod([int(s) for s in ins[0].shape])), dtype=np.int64)


@handles("EyeLike")
def eye_like(ctx, node, ins):
    """EyeLike(dtype, k) of a 2-D input's shape."""
    rows, cols = (int(s) for s in ins[0].shape)
    k = int(ctx.attr("k", 0))
    to = ctx.attr("dtype", None)
    if to is None:
        dt = ins[0].dtype if ctx.is_static(ins[0]) else ins[0].dtype.np
    elif to in NUMPY_TYPES:
        dt = NUMPY_TYPES[to]
    else:
        raise ctx.unsupported(f"dtype {to}", attribute="dtype")
    return np.eye(rows, cols, k, dtype=dt)


def _hann(n: np.ndarray, d: int) -> np.ndarray:
    return np.sin(n * np.pi / d) ** 2


def _hamming(n: np.ndarray, d: int) -> np.ndarray:
    return 25.0 / 46.0 - np.cos(n * np.pi * 2 / d) * (1 - 25.0 / 46.0)


def _blackman(n: np.ndarray, d: int) -> np.ndarray:
    return 0.42 - 0.5 * np.cos(n * np.pi * 2 / d) + 0.08 * np.cos(n * np.pi * 4 / d)


_WINDOWS = {"HannWindow": _hann, "HammingWindow": _hamming, "BlackmanWindow": _blackman}


@handles(*_WINDOWS)
def window(ctx, node, ins):
    """HannWindow / HammingWindow / BlackmanWindow(size; periodic, output_datatype): computed
    at load time (the size must be static)."""
    size = ctx.ints(ins[0], "size")[0]
    ctx.check_size((size,))
    to = int(ctx.attr("output_datatype", 1))
    if to not in NUMPY_TYPES:
        raise ctx.unsupported(f"output_datatype {to}", attribute="output_datatype")
    dt = NUMPY_TYPES[to]
    d = size if int(ctx.attr("periodic", 1)) else size - 1
    return _WINDOWS[node.op_type](np.arange(size, dtype=dt), d).astype(dt)
