"""Unary kernels (gpucore/ops/unary.py): the math functions and activations of unary.comp, their
backward ops (the activations of cpu/opcodes.def's GC_ACT), gelu (both approximations), and log1p,
which runs on binary.comp's strided path (elementwise.py's ``_run_strided``).

Every unary.comp op is registered from the extension's op codes (``_cpu.OPCODES["unary"]``), so a
new unary op needs no code here. Inputs are made contiguous first; contiguous float32 chains join
the stream's fused.comp program when fusion is on (``try_fuse``). float16 / bfloat16 run on
unary.comp's HALF variant (widened to float32 per element and rounded back, as the CPU).
"""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .... import dtypes as D
from .. import fusion
from .common import (
    KERNELS,
    _dispatch,
    _push,
    contiguous,
    flat_local_size,
    groups_1d,
    kernel,
    try_fuse,
)
from .elementwise import _NPTYPE, _OP, _accepts_float_unary, _fits, _run_strided

# Op codes come from cpu/opcodes.def through the extension (unary.comp / fused.comp use the same).
_OPCODES = _cpu.OPCODES
_GELU, _GELU_TANH = _OPCODES["unary"]["gelu"], _OPCODES["unary"]["gelu_tanh"]
# gelu_tanh is gelu with approximate="tanh", not an op of its own; log1p runs on binary.comp's
# strided path (below), whose accurate log1p unary.comp does not have
_UNARY_CODES = {k: c for k, c in _OPCODES["unary"].items() if k not in ("gelu_tanh", "log1p")}


_FLOATS = (D.float32, D.float16, D.bfloat16)
# unary.comp's HALF constant (half.glsl's HALF_F16 / HALF_BF16) by numpy dtype (bfloat16: uint16)
_HALF_KIND = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.uint16): 2}


def _accepts_same_float(inputs, specs):
    """float32, float16 or bfloat16, every input and the output of one dtype."""
    dt = specs[1]
    return dt in _FLOATS and all(t._dtype is dt for t in inputs)


def _record(be, code: int, backward: int, a, b, out):
    """One unary.comp dispatch: out = f(a) (b = a), or f'(a) * b for BACKWARD; half types
    write a word (two elements) per invocation."""
    n = out.size
    half = _HALF_KIND[out.dtype]
    oa, ob, oy = be.operand(a), be.operand(b), be.operand(out)
    y_off, items = oy.offset, n
    if half:
        assert oy.offset % 2 == 0, "16-bit outputs must start on a 32-bit word"
        y_off, items = oy.offset // 2, -(-n // 2)
    _dispatch(
        be,
        "unary",
        (code, backward, half),
        [(a, oa, False), (b, ob, False), (out, oy, True)],
        _push(n, oa.offset, ob.offset, y_off),
        groups_1d(items, flat_local_size(be)),
    )


def _unary(name, code):
    def run(be, out, x, **attrs):
        c = code
        if attrs.get("approximate") == "tanh":
            c = _GELU_TANH
        x = contiguous(be, x)
        if out.size == 0 or try_fuse(be, c, name, out, x):
            return
        _record(be, c, 0, x, x, out)

    run.half = True
    return run


# float64: the unary ops binaryf64.comp computes exactly on doubles (its UNARY mode)
_F64_UNARY = (
    "neg",
    "abs",
    "sqrt",
    "sign",
    "reciprocal",
    "floor",
    "ceil",
    "trunc",
    "round",
    "exp",
    "log",
)


def _accepts_f64_unary(inputs, specs):
    return inputs[0]._dtype is D.float64 and specs[1] is D.float64 and _fits(specs[0], inputs, 7)


def _with_float64(name, code, run):
    def run64(be, out, x, **attrs):
        if x.dtype == np.float64:
            if out.size:
                _run_strided(be, out, code, _NPTYPE[x.dtype], x, mode=1)
            return
        run(be, out, x, **attrs)

    run64.half = True
    run64.float64_math = True
    return run64


for _name, _code in _UNARY_CODES.items():
    if _name in _F64_UNARY:
        _acc = lambda i, s: _accepts_same_float(i, s) or _accepts_f64_unary(i, s)  # noqa: E731
        kernel(_name, accepts=_acc)(_with_float64(_name, _code, _unary(_name, _code)))
    else:
        kernel(_name, accepts=_accepts_same_float)(_unary(_name, _code))


def _unary_bwd(name, code):
    def run(be, out, g, saved, **attrs):
        c = _GELU_TANH if (code == _GELU and attrs.get("approximate") == "tanh") else code
        g = contiguous(be, g)
        saved = contiguous(be, saved)
        if out.size == 0 or try_fuse(be, fusion.BACKWARD + c, name, out, saved, g):
            return
        _record(be, c, 1, saved, g, out)

    run.half = True
    return run


# the activations (opcodes.def's GC_ACT) are the unary ops with a backward kernel
for _name in _OPCODES["act"]:
    if _name in _UNARY_CODES:
        _bwd = _unary_bwd(f"{_name}_backward", _UNARY_CODES[_name])
        kernel(f"{_name}_backward", accepts=_accepts_same_float)(_bwd)


# ----------------------------------------------------------------------------- strided
@kernel("log1p", accepts=_accepts_float_unary)
def _log1p(be, out, x):
    _run_strided(be, out, _OP["log1p"], _NPTYPE[x.dtype], x)


_log1p.half = True  # binary.comp reads and writes float16 / bfloat16 (backend.py never widens it)


# Every kernel here maps row i of its output to row i of its inputs, so the backend may split
# tensors larger than one storage binding into bands of rows.
for _fn in {KERNELS[n] for n in list(KERNELS) if KERNELS[n].__module__ == __name__}:
    _fn.chunk_rows = True
