"""float64 reductions (shaders/reduce64.comp: sum, mean, amax, amin in double precision, one
invocation per output column, Kahan-compensated sums) and float64 softmax composed of them and
binaryf64.comp's exp, on devices with shaderFloat64 (``Context.float64``; the kernels using these
are flagged ``float64_math``, so elsewhere float64 stays on the host). Max / min propagate NaN
as the CPU; sums are within a few ulps of numpy's pairwise ones.
"""

from __future__ import annotations

import math

import numpy as np

from .... import _cpu
from .common import _dispatch, contiguous, flat_local_size, groups_1d
from .elementwise import _F64, _OP, _run_strided

_RED = _cpu.OPCODES["reduce_op"]
SUM, MAX, MIN = _RED["SUM"], _RED["MAX"], _RED["MIN"]
_EXP = _cpu.OPCODES["unary"]["exp"]


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
