"""Membership kernel (gpucore/ops/membership.py): isin through ``_cpu.isin`` (cpu/isin.c). The
backend hands it float16 / bfloat16 operands widened to float32 (exact, equality unchanged); the
limited unsigned dtypes never reach it (the registry refuses them, as PyTorch)."""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .common import kernel


@kernel("isin")
def _isin(out, elements, test, invert):
    x, t = np.ascontiguousarray(elements), np.ascontiguousarray(test)
    scratch = np.empty(t.size, t.dtype)
    res = out if out.flags.c_contiguous else np.empty(out.shape, np.bool_)
    _cpu.isin(x.reshape(-1), t.reshape(-1), scratch, res.reshape(-1), int(invert))
    if res is not out:
        np.copyto(out, res)
