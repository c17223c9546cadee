"""Registry ops as calls of the C extension's bindings, for the compiled executor.

A lowering ``(out, arrays, attrs, scratch) -> [(binding, args), ...] | None`` makes the calls
that the op's CPU kernel (gpucore/backends/cpu/kernels/) would make for these arrays, with the
same arguments; None when the kernel would do more than call bindings on them (integer math in
numpy, a copy of a non-contiguous operand), and then the node runs its kernel from Python.
The planner hands every node C-contiguous arrays, except where an op accepts strided inputs.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _cpu
from ...backends.cpu.kernels.common import BINARY, UNARY, _oni
from . import packing
from .ops import LOWERINGS

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _float(*arrays) -> bool:
    return all(a is None or a.dtype in _FLOATS for a in arrays)


def lowering(*names):
    def deco(fn):
        for n in names:
            LOWERINGS[n] = fn
        return fn

    return deco


def _unary(code):
    def lower(out, arrays, attrs, scratch):
        (x,) = arrays
        if not _float(x, out) or x.dtype != out.dtype:
            return None
        return [("unary", (code, x.reshape(-1), out.reshape(-1)))]

    return lower


for _name, _code in UNARY.items():
    if _name not in ("gelu", "gelu_tanh"):
        LOWERINGS[_name] = _unary(_code)


@lowering("gelu")
def _gelu(out, arrays, attrs, scratch):
    code = _cpu.UNARY_GELU_TANH if attrs["approximate"] == "tanh" else _cpu.UNARY_GELU
    return _unary(code)(out, arrays, {}, scratch)


def _binary(code):
    def lower(out, arrays, attrs, scratch):
        a, b = arrays
        if not _float(a, b) or a.dtype != b.dtype:
            return None
        return [("binary", (code, a, b, out))]

    return lower


for _name, _code in BINARY.items():
    LOWERINGS[_name] = _binary(_code)


@lowering("where")
def _where(out, arrays, attrs, scratch):
    cond, a, b = arrays
    if not _float(a, b):
        return None
    return [("where", (cond, a, b, out))]


@lowering("clone")
def _clone(out, arrays, attrs, scratch):
    (x,) = arrays
    if x.dtype != out.dtype or x.dtype.itemsize not in (1, 2, 4, 8):
        return None
    return [("copy", (x, out))]


def _reduce(code):
    def lower(out, arrays, attrs, scratch):
        (x,) = arrays
        if not _float(x) or not x.flags.c_contiguous:
            return None
        dims = attrs["dims"]
        if dims and dims != tuple(range(dims[0], dims[-1] + 1)):
            return None  # the kernel would transpose a copy first
        xc, outer, n, inner = _oni(x, dims)
        return [("reduce", (code, xc.reshape(-1), out.reshape(-1), outer, n, inner))]

    return lower


LOWERINGS["sum"] = _reduce(_cpu.REDUCE_SUM)
LOWERINGS["mean"] = _reduce(_cpu.REDUCE_MEAN)
LOWERINGS["amax"] = _reduce(_cpu.REDUCE_MAX)
LOWERINGS["amin"] = _reduce(_cpu.REDUCE_MIN)


def _arg_reduce(code):
    reduce = _reduce(code)

    def lower(out, arrays, attrs, scratch):
        (x,) = arrays
        dim = attrs["dim"]
        if dim is None or x.ndim == 0:  # over every element, as the kernel does
            if not x.flags.c_contiguous:
                return None
            x, dim = x.reshape(-1), 0
        return reduce(out, [x], {"dims": (dim,)}, scratch)

    return lower


LOWERINGS["argmax"] = _arg_reduce(_cpu.REDUCE_ARGMAX)
LOWERINGS["argmin"] = _arg_reduce(_cpu.REDUCE_ARGMIN)


def _softmax(log):
    def lower(out, arrays, attrs, scratch):
        (x,) = arrays
        if not _float(x) or not x.flags.c_contiguous:
            return None
        dim = attrs["dim"] % max(x.ndim, 1)
        outer = math.prod(x.shape[:dim])
        n = x.shape[dim] if x.ndim else 1
        inner = math.prod(x.shape[dim + 1 :])
        return [("softmax", (x.reshape(-1), out.reshape(-1), outer, n, inner, log))]

    return lower


LOWERINGS["softmax"] = _softmax(0)
LOWERINGS["log_softmax"] = _softmax(1)


@lowering("linear")
def _linear(out, arrays, attrs, scratch):
    x, w = arrays[:2]
    b = arrays[2] if len(arrays) > 2 else None
    if not _float(x, w, b) or x.ndim != 2 or not (x.flags.c_contiguous and w.flags.c_contiguous):
        return None
    m, k = x.shape
    n = w.shape[0]
    wp = packing.gemm_operand(w, w.reshape(-1), "b", m, n, k, 1, 0, 1)  # constant: pre-packed
    args = (x.reshape(-1), wp, out.reshape(-1), 1, m, n, k, 0, 1, 1.0, 0.0, 0, 0)
    return [("gemm_ex", args + (m * n, b, -1))]


@lowering("conv2d")
def _conv2d(out, arrays, attrs, scratch):
    x, w = arrays[:2]
    b = arrays[2] if len(arrays) > 2 else None
    if not _float(x, w, b):
        return None
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    geometry = (n, c, h, wd, kh, kw, *attrs["stride"], *attrs["padding"], *attrs["dilation"], o)
    w = packing.conv_weight(w, out.shape[2] * out.shape[3], geometry)  # constant: pre-packed
    return [("conv2d_forward", (x, w, b, out) + geometry)]


@lowering("max_pool2d")
def _max_pool2d(out, arrays, attrs, scratch):
    (x,) = arrays
    if attrs.get("output_index", 0) != 0 or not _float(x):
        return None
    n, c, h, w = x.shape
    oh, ow = out.shape[2:]
    if n * c == 0:
        return []
    # the values only (idx None): the graph reads output 0 alone, so the indices (int64, twice
    # the values' bytes) would be written for nothing (the registry op's scratch goes unused)
    geometry = (n * c, h, w, *attrs["kernel"], *attrs["stride"], *attrs["padding"])
    return [("max_pool2d", (x, out, None) + geometry + (*attrs["dilation"], oh, ow))]


@lowering("cat")
def _cat(out, arrays, attrs, scratch):
    # one strided copy of each input into its slice of out: the bytes np.concatenate writes
    dim, start, calls = attrs["dim"], 0, []
    for a in arrays:
        if a.dtype != out.dtype or a.dtype.itemsize not in (1, 2, 4, 8):
            return None
        n = a.shape[dim]
        if n:
            calls.append(("copy", (a, out[(slice(None),) * dim + (slice(start, start + n),)])))
        start += n
    return calls


@lowering("im2col")
def _im2col(out, arrays, attrs, scratch):
    (x,) = arrays
    if not _float(x) or not x.flags.c_contiguous or x.dtype != out.dtype:
        return None
    n, c, h, w = x.shape
    geometry = (*attrs["kernel"], *attrs["stride"], *attrs["padding"], *attrs["dilation"])
    return [("im2col", (x, out, n, c, h, w) + geometry)]


@lowering("gather")
def _gather(out, arrays, attrs, scratch):
    x, index = arrays
    if index.dtype != np.int64 or x.dtype != out.dtype or x.dtype.itemsize not in (1, 2, 4, 8):
        return None
    return [("gather", (x, index, out, attrs["dim"]))]


_CAST_TYPES = frozenset(
    np.dtype(t)
    for t in (np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float32, np.float64)
)


@lowering("to_dtype")
def _to_dtype(out, arrays, attrs, scratch):
    """The kernel's ``np.copyto(out, x, casting="unsafe")``: ``_cpu.cast`` gives its bits (as on
    x86-64) for these types; float16 and bfloat16 (uint16 bit patterns) stay numpy's."""
    (x,) = arrays
    if x.dtype not in _CAST_TYPES or out.dtype not in _CAST_TYPES:
        return None
    return [("cast", (x, out))]
