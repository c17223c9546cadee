"""Unary kernels (gpucore/ops/unary.py): the math functions and activations, their backward ops,
gelu (both approximations) and log1p.

The kernels are registered from the extension's unary op codes (``UNARY``), each with its fast
lane in ``FAST`` (``fast_unary``, ``fast_unary_backward``), so a new unary op needs no code here.
Its C side: cpu/unary.c through the binding cpu/python/unary.c.
"""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .common import FAST, UNARY, _c, _isf, kernel

# Integer and bool inputs of the unary ops that keep their dtype (the others compute in float).
_UNARY_NP = {
    "neg": np.negative,
    "abs": np.abs,
    "sign": lambda x: x if x.dtype == np.bool_ else np.sign(x),  # numpy has no bool sign
    "relu": lambda x: np.maximum(x, 0),
    # rounding an integer tensor is the identity (PyTorch keeps its dtype)
    "floor": np.copy,
    "ceil": np.copy,
    "trunc": np.copy,
    "round": np.copy,
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
