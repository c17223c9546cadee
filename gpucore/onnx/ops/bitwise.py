"""BitwiseAnd / Or / Xor / Not and BitShift, and ``widened``: how the elementwise handlers run
ONNX's arithmetic on uint16 / uint32 / uint64 tensors, which gpucore (as PyTorch) gives only
limited support. Such operands are computed as int64 and converted back: exact for uint16 and
uint32; for uint64 the int64 bit patterns are the same modulo 2**64 (add, sub, mul, the bitwise
ops, left shifts), order is kept by flipping the top bit (comparisons, Max, Min), right shifts
mask the sign fill away, and Div and Mod run on uint64 itself (ops/elementwise.py: the integer
division kernels, exact for uint64 on the CPU and on Vulkan's binary64.comp).
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as D
from ...creation import full_like
from ...tensor import Tensor
from .common import gc, table

HANDLERS, handles = table()
_TOP = -(2**63)  # int64's sign bit


def limited(*ts) -> bool:
    """Whether any operand is a uint16 / uint32 / uint64 tensor."""
    return any(isinstance(t, Tensor) and t.dtype in D.LIMITED for t in ts)


def _wide(t: Tensor, order: bool) -> Tensor:
    w = t.to(D.int64)
    return w ^ _TOP if order and t.dtype is D.uint64 else w


def widened(fn, *ts, order: bool = False):
    """``fn`` of int64 forms of the operands, the result converted back to the first operand's
    dtype when it is int64 (bool results stay). ``order``: uint64 with its top bit flipped, so
    that int64's order is uint64's (comparisons, Max, Min; the flip is undone on the result)."""
    dt = ts[0].dtype
    out = fn(*[_wide(t, order) for t in ts])
    if out.dtype is not D.int64:
        return out
    if order and dt is D.uint64:
        out = out ^ _TOP
    return out.to(dt)


_BITWISE = {
    "BitwiseAnd": (np.bitwise_and, gc.bitwise_and),
    "BitwiseOr": (np.bitwise_or, gc.bitwise_or),
    "BitwiseXor": (np.bitwise_xor, gc.bitwise_xor),
}


@handles(*_BITWISE)
def bitwise(ctx, node, ins):
    """BitwiseAnd / BitwiseOr / BitwiseXor of integer tensors (broadcasting)."""
    a, b = ins
    np_fn, gc_fn = _BITWISE[node.op_type]
    ctx.broadcast(a.shape, b.shape)
    if ctx.is_static(a) and ctx.is_static(b):
        return np.asarray(np_fn(a, b))
    return gc_fn(ctx.tensor(a), ctx.tensor(b))


@handles("BitwiseNot")
def bitwise_not(ctx, node, ins):
    """BitwiseNot of an integer tensor."""
    (x,) = ins
    if ctx.is_static(x):
        return np.invert(x)
    t = ctx.tensor(x)
    return widened(gc.bitwise_not, t) if limited(t) else gc.bitwise_not(t)


@handles("BitShift")
def bit_shift(ctx, node, ins):
    """BitShift(direction LEFT / RIGHT) of unsigned integer tensors by per-element amounts."""
    x, s = ins
    direction = ctx.attr("direction")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.invalid(f"direction must be LEFT or RIGHT, got {direction!r}")
    ctx.broadcast(x.shape, s.shape)
    left = direction == "LEFT"
    if ctx.is_static(x) and ctx.is_static(s):
        return (np.left_shift if left else np.right_shift)(x, s.astype(x.dtype))
    tx, ts = ctx.tensor(x), ctx.tensor(s)
    if not limited(tx):
        return gc.bitwise_left_shift(tx, ts) if left else gc.bitwise_right_shift(tx, ts)
    wx, ws = tx.to(D.int64), ts.to(D.int64)
    if left:
        return gc.bitwise_left_shift(wx, ws).to(tx.dtype)
    out = gc.bitwise_right_shift(wx, ws)
    if tx.dtype is D.uint64:  # clear the sign fill: keep the low 64 - s bits
        out = out & ~gc.bitwise_left_shift(full_like(ws, -1), 64 - ws)
    return out.to(tx.dtype)
