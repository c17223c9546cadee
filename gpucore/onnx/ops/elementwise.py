"""Binary arithmetic, comparisons, logical ops, Where, Min/Max/Sum/Mean, Clip, Cast.

Broadcasting is numpy's (ONNX's multidirectional broadcasting), which gpucore's ops follow.
Static operands give static results computed in numpy with ONNX's dtype rules; otherwise the
gpucore op runs on tensors (a static operand becomes a constant of its own dtype).
"""

from __future__ import annotations

import functools

import numpy as np

from ... import dtypes as D
from ...tensor import Tensor
from ..proto import GPUCORE_TYPES, NUMPY_TYPES, TYPE_NAMES
from .bitwise import limited, widened
from .common import gc, table

HANDLERS, handles = table()


def _np_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":  # ONNX: integer division truncates toward zero (as C)
        q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
        return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)
    return np.divide(a, b)


def _np_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.power(a, b).astype(a.dtype)  # ONNX: the base's type, whatever the exponent's


def _int_div(a, b):
    # exact (a float quotient is not, past 2^24), and an integer kernel on every device
    return gc.div(a, b, rounding_mode="trunc")


def _pow(a, b):
    y = gc.pow(a, b)
    return y.to(a.dtype) if y.dtype is not a.dtype else y


_ARITH = {
    "Add": (np.add, gc.add),
    "Sub": (np.subtract, gc.sub),
    "Mul": (np.multiply, gc.mul),
    "Div": (_np_div, None),
    "Pow": (_np_pow, _pow),
    "Equal": (np.equal, gc.eq),
    "Less": (np.less, gc.lt),
    "Greater": (np.greater, gc.gt),
    "LessOrEqual": (np.less_equal, gc.le),
    "GreaterOrEqual": (np.greater_equal, gc.ge),
    "And": (np.logical_and, gc.logical_and),
    "Or": (np.logical_or, gc.logical_or),
    "Xor": (np.logical_xor, gc.logical_xor),
}


@handles(*_ARITH)
def binary(ctx, node, ins):
    """The binary elementwise ops of ``_ARITH``."""
    a, b = ins[0], ins[1]
    np_fn, gc_fn = _ARITH[node.op_type]
    ctx.broadcast(a.shape, b.shape)
    if ctx.is_static(a) and ctx.is_static(b):
        with np.errstate(all="ignore"):
            return np.asarray(np_fn(a, b))
    ta, tb = ctx.tensor(a), ctx.tensor(b)
    if limited(ta, tb):  # uint16 / uint32 / uint64: through int64 (ops/bitwise.py)
        if node.op_type == "Div" and ta.dtype is D.uint64:  # one exact integer kernel
            return _int_div(ta, tb)
        fn = _int_div if node.op_type == "Div" else gc_fn
        return widened(fn, ta, tb, order=node.op_type not in ("Add", "Sub", "Mul", "Pow"))
    if node.op_type == "Div":
        return _int_div(ta, tb) if not ta.dtype.is_floating_point else gc.div(ta, tb)
    return gc_fn(ta, tb)


@handles("Mod")
def mod(ctx, node, ins):
    """Mod: fmod=1 keeps the dividend's sign (C's fmod), fmod=0 the divisor's (Python's %)."""
    a, b = ins
    fmod = ctx.attr("fmod", 0)
    ctx.broadcast(a.shape, b.shape)
    if ctx.is_static(a) and ctx.is_static(b):
        with np.errstate(all="ignore"):
            return np.asarray((np.fmod if fmod else np.mod)(a, b))
    ta, tb = ctx.tensor(a), ctx.tensor(b)
    if ta.dtype.is_floating_point:
        return _float_mod(ta, tb, bool(fmod))
    if limited(ta, tb):  # the unsigned types: through int64, where they are non-negative
        out_dt = ta.dtype
        if out_dt is D.uint64:  # fmod and mod agree on unsigned values: one exact kernel
            return gc.remainder(ta, tb)
        ta, tb = ta.to(D.int64), tb.to(D.int64)
        return gc.remainder(ta, tb).to(out_dt)
    return gc.fmod(ta, tb) if fmod else gc.remainder(ta, tb)  # exact integer kernels


def _float_mod(a, b, fmod: bool):
    """C's fmod (the dividend's sign), or with fmod False numpy's mod: the fmod moved into the
    divisor's sign, a zero signed as the divisor (np.mod(-3, inf) is inf, np.mod(0, -2) -0)."""
    q = gc.div(a, b)
    r = a - b * q.to(GPUCORE_TYPES[7]).to(q.dtype)  # a - b * trunc(a / b)
    r = gc.where(gc.logical_and(b.isinf(), a.isfinite()), a, r)  # fmod(a, +-inf) = a
    r = gc.where(gc.logical_or(a.isinf(), gc.eq(b, 0.0)), r * float("nan"), r)  # no remainder
    if fmod:
        return r
    other_side = gc.logical_and(gc.ne(r, 0.0), gc.ne(gc.lt(r, 0.0), gc.lt(b, 0.0)))
    r = gc.where(other_side, r + b, r)
    return gc.where(gc.eq(r, 0.0), b.sign() * 0.0, r)


@handles("Not")
def logical_not(ctx, node, ins):
    """Not."""
    (x,) = ins
    return np.logical_not(x) if ctx.is_static(x) else gc.logical_not(x)


@handles("Where")
def where(ctx, node, ins):
    """Where(condition, X, Y), broadcasting all three."""
    c, x, y = ins
    ctx.broadcast(c.shape, x.shape, y.shape)
    if all(ctx.is_static(v) for v in ins):
        return np.where(c, x, y)
    cond = ctx.tensor(c)
    cond = cond if cond.dtype is GPUCORE_TYPES[9] else cond.to(GPUCORE_TYPES[9])
    return gc.where(cond, ctx.tensor(x), ctx.tensor(y))


_VARIADIC = {
    "Max": (np.maximum, gc.maximum),
    "Min": (np.minimum, gc.minimum),
    "Sum": (np.add, gc.add),
    "Mean": (np.add, gc.add),
}


@handles(*_VARIADIC)
def variadic(ctx, node, ins):
    """Max / Min / Sum / Mean of one or more inputs (broadcast together)."""
    np_fn, gc_fn = _VARIADIC[node.op_type]
    ins = [v for v in ins if v is not None]
    if not ins:
        raise ctx.invalid("needs at least one input")
    ctx.broadcast(*[v.shape for v in ins])
    if all(ctx.is_static(v) for v in ins):
        out = functools.reduce(np_fn, ins)
        return (out / len(ins)).astype(out.dtype) if node.op_type == "Mean" else out
    ts = [ctx.tensor(v) for v in ins]
    if limited(*ts) and node.op_type != "Mean":
        order = node.op_type in ("Max", "Min")
        return widened(lambda *w: functools.reduce(gc_fn, w), *ts, order=order)
    out = functools.reduce(gc_fn, ts)
    return out / len(ts) if node.op_type == "Mean" else out


@handles("Clip")
def clip(ctx, node, ins):
    """Clip: bounds as inputs (opset >= 11) or attributes (older); a missing bound is open."""
    x = ins[0]
    lo = ins[1] if len(ins) > 1 else None
    hi = ins[2] if len(ins) > 2 else None
    if ctx.opset < 11:
        lo, hi = np.asarray(ctx.attr("min", -np.inf)), np.asarray(ctx.attr("max", np.inf))
    if ctx.is_static(x) and all(v is None or ctx.is_static(v) for v in (lo, hi)):
        out = x
        if lo is not None:
            out = np.maximum(out, lo.astype(x.dtype))
        if hi is not None:
            out = np.minimum(out, hi.astype(x.dtype))
        return np.asarray(out, x.dtype)
    t = ctx.tensor(x)
    bounds = []
    for v in (lo, hi):
        if v is None or (ctx.is_static(v) and v.size == 1):
            value = None if v is None else v.reshape(-1)[0].item()
            if value is not None and t.dtype.is_floating_point and not np.isfinite(value):
                value = None  # an infinite bound clips nothing
            bounds.append(value)
        else:
            bounds.append(ctx.tensor(v))
    lo_v, hi_v = bounds
    if not isinstance(lo_v, Tensor) and not isinstance(hi_v, Tensor):
        if lo_v is None and hi_v is None:
            return t
        return t.clamp(lo_v, hi_v)
    if lo_v is not None:
        t = gc.maximum(t, lo_v) if isinstance(lo_v, Tensor) else t.clamp(lo_v, None)
    if hi_v is not None:
        t = gc.minimum(t, hi_v) if isinstance(hi_v, Tensor) else t.clamp(None, hi_v)
    return t


def _target(ctx, to: int, x):
    ctx.attr("saturate", None)  # only float8 targets saturate: none is supported
    ctx.attr("round_mode", None)
    if ctx.is_static(x):
        if to not in NUMPY_TYPES:
            raise ctx.unsupported(f"casting to {TYPE_NAMES.get(to, to)}", attribute="to")
        return NUMPY_TYPES[to]
    if to not in GPUCORE_TYPES:
        raise ctx.unsupported(
            f"casting a tensor to {TYPE_NAMES.get(to, to)} (gpucore has no such dtype)",
            attribute="to",
        )
    return GPUCORE_TYPES[to]


def cast_value(ctx, x, to: int):
    """``x`` converted to ONNX element type ``to``."""
    dt = _target(ctx, to, x)
    if ctx.is_static(x):
        with np.errstate(all="ignore"):
            return x.astype(dt)
    return x if x.dtype is dt else x.to(dt)


@handles("Cast")
def cast(ctx, node, ins):
    """Cast(to): float -> int truncates, anything -> bool is ``!= 0`` (numpy's rules)."""
    return cast_value(ctx, ins[0], int(ctx.attr("to")))


@handles("CastLike")
def cast_like(ctx, node, ins):
    """CastLike: to the dtype of the second input."""
    x, like = ins
    if ctx.is_static(like):
        code = next((k for k, v in NUMPY_TYPES.items() if np.dtype(v) == like.dtype), None)
    else:
        code = next((k for k, v in GPUCORE_TYPES.items() if v is like.dtype), None)
    if code is None:
        raise ctx.unsupported(f"casting to the dtype of {like.dtype}")
    return cast_value(ctx, x, code)
