"""Scan kernels (gpucore/ops/scan.py): cumsum and cumprod of float32, int32, int64 and float64
(shaders/scan.comp; float64 as scan64.spv, on devices with shaderFloat64), the CPU kernel's
bits: each (outer, inner) lane is scanned in order by one invocation, as numpy's accumulate
does. A lane longer than ``MAX_LANE`` stays on the host (eager) or is refused by the Vulkan
executor: one invocation walking it would run for too long."""

from __future__ import annotations

import math

import numpy as np

from .... import dtypes as D
from .common import _dispatch, contiguous, copy_array, flat_local_size, groups_1d, kernel

_TYPES = {np.dtype(np.float32): 0, np.dtype(np.int32): 1, np.dtype(np.int64): 2}
_TYPES[np.dtype(np.float64)] = 3  # scan64.spv (shaderFloat64: the kernels are float64_math)
MAX_LANE = 1 << 22


def _accepts(inputs, specs):
    (x,) = inputs
    shape, dt = specs
    if dt is not x._dtype or dt not in (D.float32, D.int32, D.int64, D.float64):
        return False
    return max(x.shape, default=1) <= MAX_LANE  # the scanned dim is one of them


def _scan(mode: int):
    def run(be, out, x, dim):
        if x.ndim == 0:
            x, out, dim = x.reshape(1), out.reshape(1), 0
        if out.size == 0:
            return
        n = x.shape[dim]
        outer, inner = math.prod(x.shape[:dim]), math.prod(x.shape[dim + 1 :])
        src = contiguous(be, x)
        y = out if out.flags.c_contiguous else be.empty_array(out.shape, out.dtype)
        ox, oy = be.operand(src), be.operand(y)
        lanes = outer * inner
        _dispatch(
            be,
            "scan64" if x.dtype == np.float64 else "scan",
            (mode, _TYPES[x.dtype]),
            [(src, ox, False), (y, oy, True)],
            np.array([lanes, n, inner, ox.offset, oy.offset], np.uint32),
            groups_1d(lanes, flat_local_size(be)),
        )
        if y is not out:
            copy_array(be, out, y)

    return run


kernel("cumsum", accepts=_accepts)(_scan(0)).float64_math = True
kernel("cumprod", accepts=_accepts)(_scan(1)).float64_math = True
