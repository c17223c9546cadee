"""Vulkan kernels: reductions (sum, mean, amax, amin, max_dim/min_dim, argmax/argmin).

Every reduction runs over a C-contiguous [outer, n, inner] array, the CPU kernel's layout
(``oni``): the input as is when the reduced dims are adjacent, else a device copy permuted so
that they are trailing (made by the strided-copy shader). Shader: shaders/reduce.comp, built as
``reduce_sg`` (subgroup operations, where the device has them in compute shaders) and ``reduce``
(shared-memory tree, everywhere).

Two layouts: rows (inner == 1 and n >= the workgroup size): a workgroup per (row, chunk);
columns (otherwise): an invocation per (outer, chunk, inner) column, coalesced across inner.
Rows too long for the parallelism at hand are split into chunks whose partials (and their
indices) go to a device scratch array, reduced again by the same shader until one chunk is
left; nothing waits on the device. float16 / bfloat16 inputs are read as such by the first pass
(reduce.comp's HALF) and accumulated in float32; a half result is the float32 one rounded (as the
CPU computes them). Sums are Kahan-compensated per invocation and tree-reduced
across invocations (well inside rtol 1e-5 of float64 on 1e6 elements). NaN semantics are the
CPU's: max/min propagate NaN, arg-reductions give the first NaN, else the first extreme.
"""

from __future__ import annotations

import math

import numpy as np

from .... import _cpu
from .... import dtypes as D
from . import reduce64
from .common import KERNELS, _push, contiguous, copy_array, groups_1d, kernel, launch, local_size
from .elementwise import _NPTYPE, _OP, _run_strided, cast_array

_CLAMP = _OP["clamp"]

# reduce.comp's OP codes and push flags, from cpu/opcodes.def
_OP, _FLAG = _cpu.OPCODES["reduce_op"], _cpu.OPCODES["reduce_flag"]
SUM, MAX, MIN = _OP["SUM"], _OP["MAX"], _OP["MIN"]
F_IDX_IN, F_VALS, F_IDX, F_IDX64, F_MEAN = (
    _FLAG[k] for k in ("F_IDX_IN", "F_VALS", "F_IDX", "F_IDX64", "F_MEAN")
)
TARGET_GROUPS = 128  # workgroups a split pass aims for when there are few rows

# None: use subgroup operations where the device supports them; False: never (tests set this to
# exercise the shared-memory variant on a device that has subgroups).
SUBGROUPS: bool | None = None


def device_has_subgroups(ctx) -> bool:
    """True when compute shaders on this device have subgroup basic, vote and arithmetic."""
    vk = ctx.vk
    need = (
        vk.VK_SUBGROUP_FEATURE_BASIC_BIT
        | vk.VK_SUBGROUP_FEATURE_VOTE_BIT
        | vk.VK_SUBGROUP_FEATURE_ARITHMETIC_BIT
    )
    return ctx.subgroup_size > 1 and ctx.has_subgroup_ops(need)


def shader(be, family: str) -> str:
    """The SPIR-V module of a reduction family for this device: ``<family>_sg`` or ``<family>``."""
    if SUBGROUPS is not False and device_has_subgroups(be.ctx):
        return family + "_sg"
    return family


def wg_size(be) -> int:
    """Workgroup size of the reduction shaders: a power of two, at least one subgroup."""
    wg = max(local_size(be), be.ctx.subgroup_size)
    wg = 1 << (wg - 1).bit_length()
    return min(wg, be.ctx.limits.get("maxComputeWorkGroupInvocations", 1024))


def oni(be, x: np.ndarray, dims: tuple):
    """(array, outer, n, inner): x as a C-contiguous device array reducing ``dims`` (sorted) as
    the middle axis of [outer, n, inner]; copies only when x is strided or dims not adjacent."""
    if not dims:
        return contiguous(be, x), x.size, 1, 1
    ones = tuple(i for i in range(x.ndim) if x.shape[i] == 1)
    if ones and len(ones) < x.ndim:  # size-1 dims never matter; np.squeeze is always a view
        x = np.squeeze(x, axis=ones)
        dims = tuple(d - sum(1 for i in ones if i < d) for d in dims if d not in ones)
        if not dims:
            return contiguous(be, x), math.prod(x.shape), 1, 1
    shape = x.shape
    if dims == tuple(range(dims[0], dims[-1] + 1)):
        return (
            contiguous(be, x),
            math.prod(shape[: dims[0]]),
            math.prod(shape[dims[0] : dims[-1] + 1]),
            math.prod(shape[dims[-1] + 1 :]),
        )
    keep = tuple(i for i in range(x.ndim) if i not in dims)
    xt = x.transpose(keep + dims)
    xc = be.empty_array(xt.shape, x.dtype)
    copy_array(be, xc, xt)
    return xc, math.prod(shape[i] for i in keep), math.prod(shape[i] for i in dims), 1


def use_rows(n: int, inner: int, wg: int) -> bool:
    return inner == 1 and n >= wg


def split(outer: int, n: int, inner: int, wg: int) -> tuple:
    """(nchunks, chunk): how a pass splits n so that few long rows still fill the device."""
    if use_rows(n, inner, wg):
        nch = 1
        if outer < TARGET_GROUPS and n > 8 * wg:
            nch = min(-(-TARGET_GROUPS // outer), -(-n // (8 * wg)))
    else:
        cols, target = outer * inner, TARGET_GROUPS * wg
        nch = 1
        if cols < target and n > 64:
            nch = min(-(-target // cols), -(-n // 32))
    chunk = max(1, -(-n // nch))
    return max(1, -(-n // chunk)), chunk


_HALF_KIND = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.uint16): 2}


def reduce(be, x: np.ndarray, dims: tuple, op: int, vals=None, idx=None, mean: bool = False):
    """Reduce ``dims`` of device array x (float32, float16 or bfloat16 as uint16) into ``vals``
    (float32, or x's half type: rounded from float32) and/or ``idx`` (int64 indices along the
    flattened reduced dims), both C-contiguous with outer*inner elements."""
    if vals is not None and vals.dtype != np.float32:
        wide = be.empty_array(vals.shape, np.float32)
        reduce(be, x, dims, op, wide, idx, mean)
        cast_array(be, vals, wide)
        return
    xc, outer, n, inner = oni(be, x, dims)
    if outer * inner == 0:
        return
    half = _HALF_KIND[xc.dtype]
    arg = idx is not None
    wg = wg_size(be)
    name = shader(be, "reduce")
    src, src_idx, denom = xc, None, float(n)
    while True:
        rows = use_rows(n, inner, wg)
        nch, chunk = split(outer, n, inner, wg)
        final = nch == 1
        flags = F_IDX_IN if src_idx is not None else 0
        if final:
            v_out, i_out = vals, idx
            if v_out is not None:
                flags |= F_VALS | (F_MEAN if mean else 0)
            if arg:
                flags |= F_IDX | F_IDX64
        else:
            v_out = be.empty_array((outer * nch * inner,), np.float32)
            i_out = be.empty_array((outer * nch * inner,), np.uint32) if arg else None
            flags |= F_VALS | (F_IDX if arg else 0)
        ox = be.operand(src)
        v_bind = v_out if v_out is not None else src
        i_in = src_idx if src_idx is not None else src
        i_bind = i_out if i_out is not None else v_bind
        ov, oii, oio = be.operand(v_bind), be.operand(i_in), be.operand(i_bind)
        io_off = oio.offset * (2 if i_bind.itemsize == 8 else 1)
        push = _push(
            outer, n, inner, chunk, nch, ox.offset, ov.offset, oii.offset, io_off, flags, denom
        )
        operands = [
            (src, False),
            (v_bind, v_out is not None),
            (i_in, False),
            (i_bind, i_out is not None),
        ]
        spec = (op, int(arg), 0 if rows else 1, half if src is xc else 0)
        if rows:
            groups = groups_1d(outer * nch * wg, wg)
        else:
            groups = groups_1d(outer * nch * inner, wg)
        launch(be, name, spec, operands, push, groups, local=wg)
        if final:
            return
        src, src_idx, n = v_out, i_out, nch


# ----------------------------------------------------------------------------- kernels
_FLOATS = (D.float32, D.float16, D.bfloat16)


def _accepts_dim(inputs, specs):
    """float32, float16 or bfloat16 data; values of its dtype and indices int64."""
    dt = inputs[0]._dtype
    if dt not in _FLOATS:
        return False
    outs = specs if isinstance(specs, list) else [specs]
    return all(odt is (D.int64 if i == len(outs) - 1 else dt) for i, (_, odt) in enumerate(outs))


def _accepts_values(inputs, specs):
    """float32, float16 or bfloat16 data; the result float32 or of the data's dtype (a half sum
    with dtype=float32 reads the halves directly)."""
    dt = inputs[0]._dtype
    return dt in _FLOATS and specs[1] in (dt, D.float32)


@kernel("sum", accepts=lambda i, s: _accepts_values(i, s) or _accepts_f64(i, s))
def _sum(be, out, x, dims, keepdim, shape):
    if x.dtype == np.float64:
        _f64(be, out, x, dims, SUM)
        return
    reduce(be, x, dims, SUM, vals=out)


@kernel("mean", accepts=lambda i, s: _accepts_values(i, s) or _accepts_f64(i, s))
def _mean(be, out, x, dims, keepdim, shape):
    if x.dtype == np.float64:
        _f64(be, out, x, dims, SUM, mean=True)
        return
    reduce(be, x, dims, SUM, vals=out, mean=True)


# bool, int8, uint8, int16 and uint16 max / min, and all / any: exact in float32 (every value
# is), so the data is cast to float32 on the device (all / any: its truth value first, NaN true
# as on the CPU), reduced by reduce.comp and cast back.
_SMALL = (D.bool_, D.int8, D.uint8, D.int16, D.uint16)
_INTS = (D.int32, D.int64, D.uint32, D.uint64)  # all / any: their truth values


def _accepts_small(inputs, specs):
    return inputs[0]._dtype in _SMALL and specs[1] is inputs[0]._dtype


def _accepts_truth(inputs, specs):
    return inputs[0]._dtype in (*_SMALL, *_INTS, D.float32) and specs[1] is D.bool_


def _small(x: np.ndarray) -> bool:
    """x holds one of _SMALL's dtypes (a uint16 array by its tag: untagged it is bfloat16)."""
    return x.dtype in (np.bool_, np.int8, np.uint8, np.int16) or D.is_uint16(x)


def _via_float(be, out, x, dims, op: int, truth: bool = False):
    if truth and x.dtype != np.bool_:
        b = be.empty_array(x.shape, np.bool_)
        cast_array(be, b, x)
        x = b
    f = be.empty_array(x.shape, np.float32)
    cast_array(be, f, x)
    v = be.empty_array(out.shape, np.float32)
    reduce(be, f, dims, op, vals=v)
    if truth:  # an empty reduction gives -inf (any: False) / +inf (all: True), as 0 / 1
        _run_strided(be, v, _CLAMP, _NPTYPE[v.dtype], v, lo=0.0, hi=1.0)
    cast_array(be, out, v)


def _accepts_f64(inputs, specs):
    return inputs[0]._dtype is D.float64 and specs[1] is D.float64


def _accepts_extreme(inputs, specs):
    return any(f(inputs, specs) for f in (_accepts_values, _accepts_small, _accepts_f64))


def _f64(be, out, x, dims, op, mean=False):
    """float64 through reduce64.comp (devices with shaderFloat64: the kernels are flagged)."""
    xc, outer, n, inner = oni(be, x, dims)
    reduce64.run(be, out, xc, outer, n, inner, op, mean)


@kernel("amax", accepts=_accepts_extreme)
def _amax(be, out, x, dims, keepdim, shape):
    if x.dtype == np.float64:
        _f64(be, out, x, dims, MAX)
    elif _small(x):
        _via_float(be, out, x, dims, MAX)
    else:
        reduce(be, x, dims, MAX, vals=out)


@kernel("amin", accepts=_accepts_extreme)
def _amin(be, out, x, dims, keepdim, shape):
    if x.dtype == np.float64:
        _f64(be, out, x, dims, MIN)
    elif _small(x):
        _via_float(be, out, x, dims, MIN)
    else:
        reduce(be, x, dims, MIN, vals=out)


@kernel("any", accepts=_accepts_truth)
def _any(be, out, x, dims, keepdim):
    _via_float(be, out, x, dims, MAX, truth=True)


@kernel("all", accepts=_accepts_truth)
def _all(be, out, x, dims, keepdim):
    _via_float(be, out, x, dims, MIN, truth=True)


def _dim_kernel(op):
    def run(be, outs, x, dim, keepdim):
        vals, idx = outs
        reduce(be, x, (dim,) if x.ndim else (), op, vals=vals, idx=idx)

    return run


kernel("max_dim", accepts=_accepts_dim)(_dim_kernel(MAX))
kernel("min_dim", accepts=_accepts_dim)(_dim_kernel(MIN))


def _arg_kernel(op):
    def run(be, out, x, dim, keepdim):
        dims = tuple(range(x.ndim)) if dim is None else (dim,)
        reduce(be, x, dims if x.ndim else (), op, idx=out)

    return run


kernel("argmax", accepts=_accepts_dim)(_arg_kernel(MAX))
kernel("argmin", accepts=_accepts_dim)(_arg_kernel(MIN))


# float16 / bfloat16 are read by reduce.comp itself (backend.py never widens these kernels)
for _name in ("sum", "mean", "amax", "amin", "max_dim", "min_dim", "argmax", "argmin"):
    KERNELS[_name].half = True
for _name in ("sum", "mean", "amax", "amin"):  # float64 on reduce64.comp: shaderFloat64 only
    KERNELS[_name].float64_math = True
