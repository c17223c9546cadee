"""Unary kernels (gpucore/ops/unary.py): the math functions and activations of unary.comp, their
backward ops (the activations of cpu/opcodes.def's GC_ACT), gelu (both approximations), and log1p,
which runs on binary.comp's strided path (elementwise.py's ``_run_strided``).

Every unary.comp op is registered from the extension's op codes (``_cpu.OPCODES["unary"]``), so a
new unary op needs no code here. Inputs are made contiguous first; contiguous float32 chains join
the stream's fused.comp program when fusion is on (``try_fuse``).
"""

from __future__ import annotations

from .... import _cpu
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
from .elementwise import _NPTYPE, _OP, _accepts_float_unary, _run_strided

# Op codes come from cpu/opcodes.def through the extension (unary.comp / fused.comp use the same).
_OPCODES = _cpu.OPCODES
_GELU, _GELU_TANH = _OPCODES["unary"]["gelu"], _OPCODES["unary"]["gelu_tanh"]
# gelu_tanh is gelu with approximate="tanh", not an op of its own; log1p runs on binary.comp's
# strided path (below), whose accurate log1p unary.comp does not have
_UNARY_CODES = {k: c for k, c in _OPCODES["unary"].items() if k not in ("gelu_tanh", "log1p")}


def _unary(name, code):
    def run(be, out, x, **attrs):
        c = code
        if attrs.get("approximate") == "tanh":
            c = _GELU_TANH
        x = contiguous(be, x)
        n = out.size
        if n == 0 or try_fuse(be, c, name, out, x):
            return
        ox, oy = be.operand(x), be.operand(out)
        _dispatch(
            be,
            "unary",
            (c, 0),
            [(x, ox, False), (x, ox, False), (out, oy, True)],
            _push(n, ox.offset, ox.offset, oy.offset),
            groups_1d(n, flat_local_size(be)),
        )

    return run


for _name, _code in _UNARY_CODES.items():
    kernel(_name)(_unary(_name, _code))


def _unary_bwd(name, code):
    def run(be, out, g, saved, **attrs):
        c = _GELU_TANH if (code == _GELU and attrs.get("approximate") == "tanh") else code
        g = contiguous(be, g)
        saved = contiguous(be, saved)
        n = out.size
        if n == 0 or try_fuse(be, fusion.BACKWARD + c, name, out, saved, g):
            return
        os_, og, oy = be.operand(saved), be.operand(g), be.operand(out)
        _dispatch(
            be,
            "unary",
            (c, 1),
            [(saved, os_, False), (g, og, False), (out, oy, True)],
            _push(n, os_.offset, og.offset, oy.offset),
            groups_1d(n, flat_local_size(be)),
        )

    return run


# the activations (opcodes.def's GC_ACT) are the unary ops with a backward kernel
for _name in _OPCODES["act"]:
    if _name in _UNARY_CODES:
        kernel(f"{_name}_backward")(_unary_bwd(f"{_name}_backward", _UNARY_CODES[_name]))


# ----------------------------------------------------------------------------- strided
@kernel("log1p", accepts=_accepts_float_unary)
def _log1p(be, out, x):
    _run_strided(be, out, _OP["log1p"], _NPTYPE[x.dtype], x)


# Every kernel here maps row i of its output to row i of its inputs, so the backend may split
# tensors larger than one storage binding into bands of rows.
for _fn in {KERNELS[n] for n in list(KERNELS) if KERNELS[n].__module__ == __name__}:
    _fn.chunk_rows = True
