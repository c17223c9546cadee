"""Elementwise kernels (gpucore/ops/elementwise.py): unary math and activations (+ backward),
binary arithmetic and comparisons, logical ops, where, clamp, log1p, dtype casts, copies.

The unary and binary kernels are registered from the extension's op codes (``UNARY``,
``BINARY``), each with its fast lane in ``FAST`` where the extension's fast_* entries take
the code.
"""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .common import BINARY, FAST, UNARY, _c, _isf, kernel

# ----------------------------------------------------------------------------- unary
# Integer and bool inputs of the unary ops that keep their dtype (the others compute in float).
_UNARY_NP = {
    "neg": np.negative,
    "abs": np.abs,
    "sign": np.sign,
    "relu": lambda x: np.maximum(x, 0),
}
# The two gelu codes are one op, gelu(approximate=...), with its own kernel below.
_GELU = ("gelu", "gelu_tanh")
# Ops with a ``<name>_backward`` op (no attributes) computed by the extension from the saved
# forward value; gelu_backward, with its ``approximate``, has its own kernel below.
_UNARY_BACKWARD = ("relu", "sigmoid", "tanh")


def _unary(name, code):
    def run(out, x, **attrs):
        if _isf(out):
            _cpu.unary(code, _c(x, out.dtype).reshape(-1), out.reshape(-1))
        else:
            np.copyto(out, _UNARY_NP[name](x), casting="unsafe")

    return run


for _name, _code in UNARY.items():
    if _name not in _GELU:
        kernel(_name)(_unary(_name, _code))
        FAST[_name] = (_cpu.fast_unary, _code)


if "log1p" not in UNARY:  # until the extension has a code for it (then the loop above)

    @kernel("log1p")
    def _log1p(out, x):
        # numpy's log1p writes into out (float16/bfloat16 arrive as float32).
        with np.errstate(all="ignore"):
            np.log1p(x, out=out, casting="unsafe")


@kernel("gelu")
def _gelu(out, x, approximate):
    code = _cpu.UNARY_GELU_TANH if approximate == "tanh" else _cpu.UNARY_GELU
    _cpu.unary(code, _c(x, out.dtype).reshape(-1), out.reshape(-1))


def _unary_bwd(code):
    def run(out, g, saved, **attrs):
        _cpu.unary_backward(code, _c(g).reshape(-1), _c(saved).reshape(-1), out.reshape(-1))

    return run


for _name in _UNARY_BACKWARD:
    kernel(_name + "_backward")(_unary_bwd(UNARY[_name]))
    FAST[_name + "_backward"] = (_cpu.fast_unary_backward, UNARY[_name])


@kernel("gelu_backward")
def _gelu_backward(out, g, saved, approximate="none"):
    code = _cpu.UNARY_GELU_TANH if approximate == "tanh" else _cpu.UNARY_GELU
    _cpu.unary_backward(code, _c(g).reshape(-1), _c(saved).reshape(-1), out.reshape(-1))


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


def _binary(name, code):
    def run(out, a, b):
        if _isf(a):
            _cpu.binary(code, a, b, out)
        else:
            if name == "pow" and (np.asarray(b) < 0).any():
                raise ValueError("pow(): integers to negative integer powers are not allowed")
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
