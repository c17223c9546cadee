"""Elementwise kernels (gpucore/ops/elementwise.py): binary arithmetic and comparisons, logical
ops, where, clamp, dtype casts, copies. The unary ops' kernels are in unary.py.

The binary kernels are registered from the extension's op codes (``BINARY``), the arithmetic
ones with their fast lane in ``FAST`` (``fast_binary``).
"""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .common import BINARY, FAST, _isf, kernel

# ----------------------------------------------------------------------------- binary
# Integer and bool inputs go to numpy.
_BINARY_NP = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


def _int_pow(out, a, b) -> None:
    """Signed integers to tensor powers with negative exponents, as PyTorch's CPU kernel (and
    binary.comp's ipow): 1 ** -e = 1, (-1) ** -e = -1 for odd e else 1, anything else 0 (the
    truncated 1 / a ** e); the non-negative exponents by numpy's wrapping power."""
    neg = b < 0
    with np.errstate(all="ignore"):
        np.power(a, np.where(neg, 0, b), out=out, casting="unsafe")
    odd = (b & 1) != 0
    small = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0))
    np.copyto(out, small, casting="unsafe", where=np.broadcast_to(neg, out.shape))


def _binary(name, code):
    def run(out, a, b):
        if _isf(a):
            _cpu.binary(code, a, b, out)
        elif name == "pow" and a.dtype.kind == "i" and (np.asarray(b) < 0).any():
            _int_pow(out, a, b)
        else:
            with np.errstate(all="ignore"):
                _BINARY_NP[name](a, b, out=out, casting="unsafe")

    return run


for _name, _code in BINARY.items():
    kernel(_name)(_binary(_name, _code))
    if _code < _cpu.BINARY_EQ:  # the arithmetic codes; from EQ on, comparisons (bool outputs)
        FAST[_name] = (_cpu.fast_binary, _code)


def _logical(np_fn):
    def run(out, a, b):
        np_fn(a, b, out=out)

    return run


for _name in ("logical_and", "logical_or", "logical_xor"):
    kernel(_name)(_logical(getattr(np, _name)))


@kernel("logical_not")
def _logical_not(out, x):
    np.logical_not(x, out=out)


@kernel("where")
def _where(out, cond, a, b):
    if _isf(a):
        _cpu.where(cond, a, b, out)
    else:
        np.copyto(out, np.where(cond, a, b))


@kernel("clamp")
def _clamp(out, x, min, max):  # noqa: A002
    if _isf(x):
        src = x
        if min is not None:
            _cpu.binary(_cpu.BINARY_MAXIMUM, src, np.asarray(min, out.dtype), out)
            src = out
        if max is not None:
            _cpu.binary(_cpu.BINARY_MINIMUM, src, np.asarray(max, out.dtype), out)
    else:
        np.copyto(out, np.clip(x, min, max), casting="unsafe")


# ----------------------------------------------------------------------------- copies, casts
@kernel("clone")
def _clone(out, x):
    if x.dtype.itemsize in (1, 2, 4, 8) and x.dtype == out.dtype:
        _cpu.copy(x, out)
    else:
        np.copyto(out, x)


@kernel("to_dtype")
def _to_dtype(out, x, dtype):
    with np.errstate(all="ignore"):
        np.copyto(out, x, casting="unsafe")
