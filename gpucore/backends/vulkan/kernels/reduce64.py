"""float64 reductions (shaders/reduce64.comp: sum, mean, amax, amin in double precision, one
invocation per output column, Kahan-compensated sums), and float64 softmax and (the runtime's
non-causal) attention composed of them, gemm64 and binaryf64.comp's exp, on devices with
shaderFloat64 (``Context.float64``; the kernels using these are flagged ``float64_math``, so
elsewhere float64 stays on the host; the compiled executor checks it). Max / min propagate NaN
as the CPU; sums are within a few ulps of numpy's pairwise ones.
"""

from __future__ import annotations

import math

import numpy as np

from .... import _cpu
from .common import KERNELS, _dispatch, contiguous, copy_array, flat_local_size, groups_1d
from .elementwise import _BOOL, _F64, _OP, _run_strided

_RED = _cpu.OPCODES["reduce_op"]
SUM, MAX, MIN = _RED["SUM"], _RED["MAX"], _RED["MIN"]
_EXP = _cpu.OPCODES["unary"]["exp"]
_LOG = _cpu.OPCODES["unary"]["log"]


def _where(be, out, cond, a, b):
    KERNELS["where"](be, out, cond, a, b)


def run(be, out: np.ndarray, xc: np.ndarray, outer: int, n: int, inner: int, op: int, mean=False):
    """out (C-contiguous, outer * inner doubles) = the reduction of contiguous [outer, n, inner]
    float64 device array xc over n."""
    if outer * inner == 0:
        return
    ox, oy = be.operand(xc), be.operand(out)
    push = np.array([outer, n, inner, ox.offset, oy.offset], np.uint32)
    _dispatch(
        be,
        "reduce64",
        (op, int(mean)),
        [(xc, ox, False), (out, oy, True)],
        push,
        groups_1d(outer * inner, flat_local_size(be)),
    )


def softmax64(be, out: np.ndarray, x: np.ndarray, dim: int) -> None:
    """out = exp(x - max) / sum(exp(x - max)) along ``dim``, in double precision."""
    if out.size == 0:
        return
    x = contiguous(be, x)
    shape = x.shape
    if x.ndim == 0:
        outer = n = inner = 1
    else:
        outer, n, inner = math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1 :])
    kept = shape[:dim] + (1,) + shape[dim + 1 :] if x.ndim else ()
    m = be.empty_array(kept, np.float64)
    run(be, m.reshape(-1), x, outer, n, inner, MAX)
    e = be.empty_array(shape, np.float64)
    _run_strided(be, e, _OP["sub"], _F64, x, np.broadcast_to(m, shape))
    _run_strided(be, e, _EXP, _F64, e, mode=1)
    s = be.empty_array(kept, np.float64)
    run(be, s.reshape(-1), e, outer, n, inner, SUM)
    _run_strided(be, out, _OP["div"], _F64, e, np.broadcast_to(s, shape))


def _neg_inf_or_zero(be, m: np.ndarray) -> tuple:
    """(-inf, 0.0) arrays shaped as m, made on the device from m itself (no upload: this runs
    inside captures): clamp(m, -inf, -inf) and float64(m != m); a NaN element gives NaN / 1.0,
    where neither is used (a NaN row is not a dead one)."""
    ninf = be.empty_array(m.shape, np.float64)
    _run_strided(be, ninf, _OP["clamp"], _F64, m, lo=-np.inf, hi=-np.inf)
    ne = be.empty_array(m.shape, np.bool_)
    _run_strided(be, ne, _OP["ne"], _F64, m, m)
    zero = be.empty_array(m.shape, np.float64)
    _run_strided(be, zero, _OP["to_dtype"], _BOOL, ne)
    return ninf, zero


def attention64(be, out, q, k, v, mask, scale: float) -> list:
    """out = softmax(q k^T * scale + mask) v in double precision (the runtime's attention node,
    non-causal; a bool mask: True may attend, as _att_eval): gemm64, the mask, softmax64's steps,
    rows whose every score is -inf set to 0 (PyTorch's SDPA), gemm64. Returns the workspace."""
    from .gemm64 import gemm64  # noqa: PLC0415 - gemm64 imports elementwise, as this module

    b, h, sq, _ = q.shape
    sk = k.shape[-2]
    s = be.empty_array((b, h, sq, sk), np.float64)
    gemm64(be, s, q, np.swapaxes(k, -1, -2), alpha=scale)
    keep = [s]
    if mask is not None:
        mask = np.broadcast_to(mask, s.shape)
        if mask.dtype == np.bool_:  # where(mask, s, -inf), the -inf as log(float64(mask))
            lg = be.empty_array(s.shape, np.float64)
            _run_strided(be, lg, _OP["to_dtype"], _BOOL, mask)
            _run_strided(be, lg, _LOG, _F64, lg, mode=1)
            _run_strided(be, s, _OP["add"], _F64, s, lg)  # s + 0 or s + -inf
            keep.append(lg)
        else:
            _run_strided(be, s, _OP["add"], _F64, s, mask)
    m = be.empty_array((b, h, sq, 1), np.float64)
    run(be, m.reshape(-1), s, b * h * sq, sk, 1, MAX)
    p = be.empty_array(s.shape, np.float64)
    _run_strided(be, p, _OP["sub"], _F64, s, np.broadcast_to(m, s.shape))
    _run_strided(be, p, _EXP, _F64, p, mode=1)
    t = be.empty_array((b, h, sq, 1), np.float64)
    run(be, t.reshape(-1), p, b * h * sq, sk, 1, SUM)
    _run_strided(be, p, _OP["div"], _F64, p, np.broadcast_to(t, s.shape))
    ninf, zero = _neg_inf_or_zero(be, m)
    dead = be.empty_array(m.shape, np.bool_)
    _run_strided(be, dead, _OP["eq"], _F64, m, ninf)
    _where(be, p, np.broadcast_to(dead, s.shape), np.broadcast_to(zero, s.shape), p)
    y = out if out.flags.c_contiguous else be.empty_array(out.shape, np.float64)
    gemm64(be, y, p, v)
    if y is not out:
        copy_array(be, out, y)
    return keep + [m, p, t, ninf, zero, dead, y]
