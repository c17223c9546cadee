"""Elementwise kernels (gpucore/ops/elementwise.py): binary arithmetic and comparisons with
broadcasting, logical and bitwise ops, where, clamp, dtype casts, copies. The unary ops' kernels
are in unary.py (log1p among them, on the strided family below). int64 / uint64 operands or
results run on binary64.comp (two 32-bit words, no shaderInt64 needed); int8 / uint8 are bytes
on binary.comp (packed like bool), int16 / uint16 16-bit halves of words (as float16), uint32
words; where copies bytes, 16-bit items, words or pairs of words. A uint16 array is told from a
bfloat16 one by its dtype's tag (``_code``, gpucore.dtypes.is_uint16), never by its numpy type.

The strided family (binary.comp, where.comp) reads its inputs in place, whatever their strides
(0 for broadcasting, negative for flips), so no copy precedes it; the host drops size-1 dims and
merges dims that are contiguous in every operand, so the common cases reach the shader as 1-D.
Outputs are the fresh contiguous arrays ``VulkanBackend.run`` allocates; a bool output is written
four elements per 32-bit word (its allocation is rounded up to 256 bytes, so the bytes past the
last element are scratch).
"""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .... import dtypes as D
from .. import fusion
from .common import (
    KERNELS,
    _accepts_words,
    _dispatch,
    copy_array,
    flat_local_size,
    groups_1d,
    kernel,
    try_fuse,
)


# ----------------------------------------------------------------------------- copies
@kernel("clone", accepts=_accepts_words)
def _clone(be, out, x):
    copy_array(be, out, x)


# ----------------------------------------------------------------------------- strided family
# Op codes come from cpu/opcodes.def through the extension (binary.comp / where.comp use the same).
_OPCODES = _cpu.OPCODES
# binary.comp's op codes and types (specialization constants 1..3), by op / dtype name.
_TYPE = {d: _OPCODES["type"][d.name] for d in (D.float32, D.int32, D.bool_)}
_F32, _BOOL = _TYPE[D.float32], _TYPE[D.bool_]
_NPTYPE = {d.np: code for d, code in _TYPE.items()}
# Type codes after opcodes.def's three: binary64.comp's int64, binary.comp's int8 / uint8 (bytes)
# and float16 / bfloat16 (16-bit halves of words, widened to float32 inside the shader)
_I64, _I8, _U8, _F16, _BF16 = 3, 4, 5, 6, 7
_NPTYPE.update({np.dtype(np.int64): _I64, np.dtype(np.int8): _I8, np.dtype(np.uint8): _U8})
# bfloat16 is stored as uint16 bit patterns (gpucore.dtypes), the only uint16 arrays there are
_NPTYPE.update({np.dtype(np.float16): _F16, np.dtype(np.uint16): _BF16})
# float64 (binaryf64.comp, native doubles: only where the device has shaderFloat64 and
# shaderInt64; kernels flagged float64_math, checked by VulkanBackend.supports)
_F64 = 8
_NPTYPE[np.dtype(np.float64)] = _F64
# int16 / uint16 (16-bit halves of words) and uint32 on binary.comp, uint64 on binary64.comp;
# a uint16 array is uint16 only when tagged (``_code``)
_I16, _U16, _U32, _U64 = 9, 10, 11, 12
_NPTYPE.update({np.dtype(np.int16): _I16, np.dtype(np.uint32): _U32, np.dtype(np.uint64): _U64})
_BYTES = (_BOOL, _I8, _U8)  # packed four to a 32-bit word
_HALVES = (_F16, _BF16, _I16, _U16)  # packed two to a 32-bit word
_WIDE = (_I64, _U64)  # binary64.comp's pairs of words


def _code(arr: np.ndarray) -> int:
    """binary.comp's type code of a device array (uint16 by its tag, else bfloat16)."""
    return _U16 if D.is_uint16(arr) else _NPTYPE[arr.dtype]


_HALF = (D.float16, D.bfloat16)
_OP = dict(_OPCODES["strided"])


class _Layout:
    """A push-constant block: ``head`` words, then arrays of ``dims`` words (shape and one stride
    array per operand). binary.comp: n, ndim, a_off, b_off, y_off, lo, hi | shape[8],
    a_stride[8], b_stride[8]; where.comp: n, ndim, c_off, a_off, b_off, y_off | shape[6],
    c_stride[6], a_stride[6], b_stride[6]."""

    def __init__(self, head: int, dims: int, arrays: int):
        self.head, self.dims, self.words = head, dims, head + dims * arrays
        assert 4 * self.words <= 128, "push constants are limited to 128 bytes"

    def pack(self, head, shape, strides) -> np.ndarray:
        buf = np.zeros(self.words, np.int64)
        buf[: len(head)] = head
        nd, d = len(shape), self.dims
        buf[self.head : self.head + nd] = shape
        for k, st in enumerate(strides):
            o = self.head + d * (k + 1)
            buf[o : o + nd] = st
        return buf.astype(np.uint32)


_BIN_PUSH = _Layout(7, 8, 3)
_F64_PUSH = _Layout(9, 7, 3)  # binaryf64.comp: clamp's bounds as doubles, 7 dims
_WHERE_PUSH = _Layout(6, 6, 4)


def _strides_in(shape: tuple, op) -> list:
    """op's element strides broadcast to ``shape`` (0 on broadcast dims)."""
    pad = len(shape) - len(op.shape)
    return [0] * pad + [st if sz != 1 else 0 for sz, st in zip(op.shape, op.strides)]


def _flat_step(arr: np.ndarray, shape: tuple):
    """1 when arr walks like the contiguous output (same shape, C order), 0 when it is one
    element broadcast everywhere, else None (the general path)."""
    if arr.size == 1:
        return 0
    if arr.shape == shape and arr.flags.c_contiguous:
        return 1
    return None


def _collapse(shape: tuple, strides: list) -> tuple:
    """(shape, [strides per operand]) with size-1 dims dropped and dims merged where every
    operand steps through them as one (stride[k] == stride[k+1] * shape[k+1])."""
    sh: list = []
    st: list = [[] for _ in strides]
    for k, size in enumerate(shape):
        if size == 1:
            continue
        if sh and all(s[-1] == o[k] * size for s, o in zip(st, strides)):
            sh[-1] *= size
            for s, o in zip(st, strides):
                s[-1] = o[k]
            continue
        sh.append(size)
        for s, o in zip(st, strides):
            s.append(o[k])
    if not sh:
        return [1], [[0] for _ in strides]
    return sh, st


def _ndim_after_collapse(shape: tuple, inputs) -> int:
    strides = []
    for t in inputs:
        a = t._data
        pad = len(shape) - a.ndim
        strides.append([0] * pad + [s if n != 1 else 0 for n, s in zip(a.shape, a.strides)])
    return len(_collapse(shape, strides)[0])


def _fits(shape: tuple, inputs, limit: int) -> bool:
    return len(shape) <= limit or _ndim_after_collapse(shape, inputs) <= limit


def _run_strided(be, out, code: int, tin: int, a, b=None, lo=0.0, hi=0.0, tout=None, mode=None):
    """out = OP(a, b) through binary.comp (b = a for the unary ops). ``tin`` / ``tout``: type
    codes (``tout`` defaults to ``_code(out)``: uint16 by its tag, else bfloat16); ``mode``:
    integer DIV's MODE (specialization constant 4)."""
    n = out.size
    if n == 0:
        return
    if b is None:
        b = a
    oa, ob, oy = be.operand(a), be.operand(b), be.operand(out)
    shape = out.shape
    fa, fb = _flat_step(a, shape), _flat_step(b, shape)
    if fa is not None and fb is not None:  # the common case, without the general merge
        sh, sa, sb = [n], [fa], [fb]
    else:
        sh, (sa, sb) = _collapse(shape, [_strides_in(shape, oa), _strides_in(shape, ob)])
    if tout is None:
        tout = _code(out)
    f64 = _F64 in (tin, tout)
    layout = _F64_PUSH if f64 else _BIN_PUSH
    if len(sh) > layout.dims:  # accepts() keeps these on the CPU
        raise ValueError(
            f"internal: {len(sh)} dims after merging exceed the shader's {layout.dims}"
        )
    if tout in _BYTES:
        assert oy.offset % 4 == 0, "byte outputs must start on a 32-bit word"
        y_off, words = oy.offset // 4, -(-n // 4)
    elif tout in _HALVES:
        assert oy.offset % 2 == 0, "16-bit outputs must start on a 32-bit word"
        y_off, words = oy.offset // 2, -(-n // 2)
    else:
        y_off, words = oy.offset * (2 if tout in (*_WIDE, _F64) else 1), n
    if f64:
        push = _F64_PUSH.pack([n, len(sh), oa.offset, ob.offset, y_off], sh, (sa, sb))
        push[5:9] = np.array([lo, hi], np.float64).view(np.uint32)
        shader = "binaryf64"
    else:
        push = _BIN_PUSH.pack([n, len(sh), oa.offset, ob.offset, y_off, 0, 0], sh, (sa, sb))
        push[5:7] = np.array([lo, hi], np.float32).view(np.uint32)
        shader = "binary64" if tin in _WIDE or tout in _WIDE else "binary"
    _dispatch(
        be,
        shader,
        (code, tin, tout) if mode is None else (code, tin, tout, mode),
        [(a, oa, False), (b, ob, False), (out, oy, True)],
        push,
        groups_1d(words, flat_local_size(be)),
    )


def _accepts_binary(types, out_bool=False):
    def accepts(inputs, specs):
        a, b = inputs
        shape, dt = specs
        if a._dtype is not b._dtype or a._dtype not in types:
            return False
        if dt is not (D.bool_ if out_bool else a._dtype):
            return False
        return _fits(shape, inputs, 7 if a._dtype is D.float64 else 8)

    return accepts


def _binary(name, code):
    fused = fusion.BINARY_CODES.get(name)

    def run(be, out, a, b):
        if fused is not None and out.size and try_fuse(be, fusion.BINARY + fused, name, out, a, b):
            return
        _run_strided(be, out, code, _code(a), a, b)

    return run


_FLOAT_ONLY = (D.float32, *_HALF)  # the half types computed in float32 and rounded back
_NUMERIC = (D.float32, D.int32, D.int64, D.float64)  # int64: binary64.comp, float64: binaryf64
_INT8 = (D.int8, D.uint8)  # binary.comp's byte types: results wrap to 8 bits, as on the CPU
# int16 / uint16 / uint32 on binary.comp, uint64 on binary64.comp (wrapping, unsigned order)
_NARROW = (D.int16, D.uint16, D.uint32, D.uint64)
_INTS = (D.int32, D.int64, *_INT8, *_NARROW)
for _name in ("add", "sub", "mul", "maximum", "minimum"):
    _accepts = _accepts_binary((*_NUMERIC, *_INT8, *_NARROW, *_HALF))
    kernel(_name, accepts=_accepts)(_binary(_name, _OP[_name]))
kernel("div", accepts=_accepts_binary((*_FLOAT_ONLY, D.float64)))(_binary("div", _OP["div"]))
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):  # bool too: binary.comp compares the bytes
    _accepts = _accepts_binary((*_NUMERIC, *_INT8, *_NARROW, *_HALF, D.bool_), out_bool=True)
    kernel(_name, accepts=_accepts)(_binary(_name, _OP[_name]))
for _name in ("logical_and", "logical_or", "logical_xor"):
    kernel(_name, accepts=_accepts_binary((D.bool_,), out_bool=True))(_binary(_name, _OP[_name]))
# The bitwise ops (gpucore/ops/bitwise.py; bool operands go to the logical ops there): every
# integer dtype, the shifts with PyTorch's results for amounts outside [0, bits)
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
              "bitwise_right_shift"):  # fmt: skip
    kernel(_name, accepts=_accepts_binary(_INTS))(_binary(_name, _OP[_name]))


def _accepts_bitwise_not(inputs, specs):
    (x,) = inputs
    return x._dtype in _INTS and specs[1] is x._dtype and _fits(specs[0], inputs, 8)


@kernel("bitwise_not", accepts=_accepts_bitwise_not)
def _bitwise_not(be, out, x):
    _run_strided(be, out, _OP["bitwise_not"], _code(x), x)


# ----------------------------------------------------------------------------- integer division
# binary.comp / binary64.comp's DIV on integers, by MODE (specialization constant 4); POW on
# integers is square-and-multiply, a negative exponent giving PyTorch's (and the CPU kernel's)
# 1, -1 or 0. Division by zero: a divisor that is a host tensor is checked when the op is accepted
# and raises the CPU kernel's ZeroDivisionError, as the op would on the CPU; one on the device is
# not read back (that would wait for the device): the shaders give numpy's 0 for x / 0 and x % 0.
_IDIV = {"trunc": 0, "floor": 1, "remainder": 2, "fmod": 3}


def _check_host_operand(name: str, b) -> None:
    """The CPU kernel's error for a host divisor holding 0 (not for ``pow``); b is
    a tensor (a spec, in a compiled model's check, has no values and passes)."""
    if getattr(b, "_dev", True) is not None or getattr(b, "_data", None) is None:
        return
    values = b._data
    if name != "pow" and (values == 0).any():
        raise ZeroDivisionError(f"{name}(): integer division by zero")


def _accepts_int(name: str):
    def accepts(inputs, specs):
        """Integers of one dtype (any integer dtype), the result of that dtype."""
        if not _accepts_binary(_INTS)(inputs, specs):
            return False
        _check_host_operand(name, inputs[1])
        return True

    return accepts


def _run_int(be, out, name: str, mode: int, a, b):
    code = _OP["pow" if name == "pow" else "div"]
    _run_strided(be, out, code, _code(a), a, b, mode=mode)


@kernel("div_rounded", accepts=_accepts_int("div"))
def _div_rounded(be, out, a, b, rounding_mode):
    _run_int(be, out, "div", _IDIV[rounding_mode], a, b)


@kernel("remainder", accepts=_accepts_int("remainder"))
def _remainder(be, out, a, b):
    _run_int(be, out, "remainder", _IDIV["remainder"], a, b)


@kernel("fmod", accepts=_accepts_int("fmod"))
def _fmod(be, out, a, b):
    _run_int(be, out, "fmod", _IDIV["fmod"], a, b)


def _accepts_pow(inputs, specs):
    return _accepts_binary(_FLOAT_ONLY)(inputs, specs) or _accepts_int("pow")(inputs, specs)


_float_pow = _binary("pow", _OP["pow"])


@kernel("pow", accepts=_accepts_pow)
def _pow(be, out, a, b):
    if a.dtype.kind in "iu":
        _run_int(be, out, "pow", 0, a, b)
    else:
        _float_pow(be, out, a, b)


def _accepts_logical_not(inputs, specs):
    (x,) = inputs
    return x._dtype in (*_CAST_TYPES, D.float64) and _fits(specs[0], inputs, 7)


@kernel("logical_not", accepts=_accepts_logical_not)
def _logical_not(be, out, x):
    _run_strided(be, out, _OP["logical_not"], _code(x), x)


def _accepts_float_unary(inputs, specs):
    dt = inputs[0]._dtype
    return dt in _FLOAT_ONLY and specs[1] is dt and _fits(specs[0], inputs, 8)


def _accepts_clamp(inputs, specs):
    if inputs[0]._dtype is D.float64:
        return specs[1] is D.float64 and _fits(specs[0], inputs, 7)
    return _accepts_float_unary(inputs, specs)


@kernel("clamp", accepts=_accepts_clamp)
def _clamp(be, out, x, min=None, max=None):  # noqa: A002 - the op's attribute names
    lo = -np.inf if min is None else float(min)
    hi = np.inf if max is None else float(max)
    _run_strided(be, out, _OP["clamp"], _code(x), x, lo=lo, hi=hi)


_CAST_TYPES = (D.float32, D.bool_, *_INTS, *_HALF)


def _accepts_cast(inputs, specs):
    """float32, float16, bfloat16, bool and every integer dtype to one another: on binary.comp,
    or binary64.comp where int64 / uint64 is one side (a float16 / bfloat16 other side through
    float32, as the CPU computes it). float32 -> an integer truncates as x86 does (the CPU):
    the 8- and 16-bit types keep the low bits of the int32 conversion; to float16 / bfloat16:
    rounded to nearest even, as the CPU."""
    (x,) = inputs
    src, dst = x._dtype, specs[1]
    return src in _CAST_TYPES and dst in _CAST_TYPES and _fits(specs[0], inputs, 8)


def _accepts_cast_f64(inputs, specs):
    """float64 to and from float32, bool and every integer dtype (binaryf64.comp), and
    float16 / bfloat16 through float32 (as the CPU computes them: float64 -> float32 -> half);
    the other casts as ``_accepts_cast``."""
    src, dst = inputs[0]._dtype, specs[1]
    if D.float64 not in (src, dst):
        return _accepts_cast(inputs, specs)
    other = dst if src is D.float64 else src
    return other in (D.float64, *_CAST_TYPES) and _fits(specs[0], inputs, 7)


@kernel("to_dtype", accepts=_accepts_cast_f64)
def _to_dtype(be, out, x, dtype):
    tin, tout = _code(x), _code(out)
    if {tin, tout} & {_I64, _U64, _F64} and {tin, tout} & {_F16, _BF16}:
        mid = be.empty_array(x.shape, np.float32)  # 64-bit <-> float16 / bfloat16: through
        _run_strided(be, mid, _OP["to_dtype"], tin, x)  # float32, as the CPU computes it
        x, tin = mid, _F32
    _run_strided(be, out, _OP["to_dtype"], tin, x)


def cast_array(be, out: np.ndarray, x: np.ndarray) -> None:
    """out (fresh, contiguous) = x cast to out's type on the device: the casts ``_accepts_cast``
    allows, float16 / bfloat16 <-> float32 among them (an untagged uint16 array is bfloat16)."""
    _run_strided(be, out, _OP["to_dtype"], _code(x), x)


# ----------------------------------------------------------------------------- where
def _accepts_where(inputs, specs):
    c, a, b = inputs
    shape, dt = specs
    return (
        c._dtype is D.bool_
        and a._dtype is b._dtype
        and a._dtype in (*_NUMERIC, *_INT8, *_NARROW, *_HALF, D.bool_)
        and dt is a._dtype
        and _fits(shape, inputs, _WHERE_PUSH.dims)
    )


@kernel("where", accepts=_accepts_where)
def _where(be, out, cond, a, b):
    n = out.size
    if n == 0:
        return
    oc, oa, ob, oy = be.operand(cond), be.operand(a), be.operand(b), be.operand(out)
    shape = out.shape
    sh, st = _collapse(shape, [_strides_in(shape, o) for o in (oc, oa, ob)])
    if len(sh) > _WHERE_PUSH.dims:
        raise ValueError(f"internal: {len(sh)} dims after merging exceed where's 6")
    item = out.itemsize
    y_off, invocations = oy.offset, n  # in items: words, or pairs of words for 8-byte items
    if item < 4:  # bytes / 16-bit items: y_off in words, one invocation per 32-bit word of y
        per = 4 // item
        assert oy.offset % per == 0, "byte and 16-bit outputs must start on a 32-bit word"
        y_off, invocations = oy.offset // per, -(-n // per)
    push = _WHERE_PUSH.pack([n, len(sh), oc.offset, oa.offset, ob.offset, y_off], sh, st)
    _dispatch(
        be,
        "where",
        ({1: 0, 2: 3, 4: 1, 8: 2}[item],),
        [(cond, oc, False), (a, oa, False), (b, ob, False), (out, oy, True)],
        push,
        groups_1d(invocations, flat_local_size(be)),
    )


# Every kernel here maps row i of its output to row i of its inputs (or to a broadcast input),
# so the backend may split tensors larger than one storage binding into bands of rows. All read
# and write float16 / bfloat16 storage themselves (``half``: the backend never widens them).
for _fn in {KERNELS[n] for n in list(KERNELS) if KERNELS[n].__module__ == __name__}:
    _fn.chunk_rows = True
    _fn.half = True

# The kernels whose float64 operands run on binaryf64.comp (doubles in the shader: the device
# must have shaderFloat64 and shaderInt64); where moves float64 as bits, anywhere.
for _name in ("add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt",
              "ge", "logical_not", "clamp", "to_dtype"):  # fmt: skip
    KERNELS[_name].float64_math = True
