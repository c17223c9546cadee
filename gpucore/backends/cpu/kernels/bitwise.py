"""Kernels of gpucore/ops/bitwise.py by numpy (exact on integers; numpy broadcasts the inputs
into ``out``). The shifts give PyTorch's CPU results for amounts outside [0, bits), which C and
numpy leave undefined: 0 to the left, the sign fill to the right."""

from __future__ import annotations

import numpy as np

from .common import kernel


@kernel("bitwise_and")
def _and(out, a, b):
    np.bitwise_and(a, b, out=out, casting="unsafe")


@kernel("bitwise_or")
def _or(out, a, b):
    np.bitwise_or(a, b, out=out, casting="unsafe")


@kernel("bitwise_xor")
def _xor(out, a, b):
    np.bitwise_xor(a, b, out=out, casting="unsafe")


@kernel("bitwise_not")
def _not(out, x):
    np.invert(x, out=out)  # logical NOT for bools


def _amounts(out, b):
    """(the shift amounts clipped into [0, bits - 1] in out's dtype, where they lay outside)."""
    bits = 8 * out.dtype.itemsize
    b = np.asarray(b)
    outside = (b < 0) | (b >= bits) if b.dtype.kind == "i" else b >= bits
    return np.where(outside, 0, b).astype(out.dtype), outside


@kernel("bitwise_left_shift")
def _left_shift(out, a, b):
    s, outside = _amounts(out, b)
    np.left_shift(a, s, out=out, casting="unsafe")
    if outside.any():
        out[np.broadcast_to(outside, out.shape)] = 0


@kernel("bitwise_right_shift")
def _right_shift(out, a, b):
    s, outside = _amounts(out, b)
    np.right_shift(a, s, out=out, casting="unsafe")
    if outside.any():  # the sign fill: -1 for negative signed values, else 0
        fill = np.asarray(a) < 0 if out.dtype.kind == "i" else np.zeros((), bool)
        where = np.broadcast_to(outside, out.shape)
        np.copyto(out, np.broadcast_to(-fill.astype(out.dtype), out.shape), where=where)
