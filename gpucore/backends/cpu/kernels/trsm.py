"""Kernels of gpucore/ops/trsm.py on cpu/trsm.c: the blocked triangular solve (a right-hand side
solved in place in ``out``; a right solve ``X T = B`` as ``T^T X^T = B^T`` on a transposed copy)
and the info codes of a partial-pivoting LU in the element's own type."""

from __future__ import annotations

import math

import numpy as np

from .... import _cpu
from .common import kernel
from .linalg import _gemm_operand


@kernel("linalg_solve_triangular")
def _solve_triangular(out, a, b, upper, left, unitriangular, dense):
    k = a.shape[-1]
    batch = math.prod(out.shape[:-2])
    abuf, ta, sa = _gemm_operand(a)  # stored transposed (ta): its other triangle holds T
    up = int(bool(upper) != bool(ta))
    if left:
        np.copyto(out, b)
        _cpu.trsm(abuf.reshape(-1), out.reshape(-1), batch, k, out.shape[-1], sa, up, ta,
                  int(unitriangular))  # fmt: skip
        return
    work = np.swapaxes(b, -1, -2).copy()  # a C-ordered copy (never a view of b: solved in place)
    _cpu.trsm(abuf.reshape(-1), work.reshape(-1), batch, k, out.shape[-2], sa, up, 1 - ta,
              int(unitriangular))  # fmt: skip
    np.copyto(out, np.swapaxes(work, -1, -2))


@kernel("lu_info")
def _lu_info(out, a):
    n = a.shape[-1]
    batch = math.prod(out.shape)
    work = np.array(a, order="C").reshape(batch, n, n)  # a copy: the LU overwrites it
    if batch:
        _cpu.getrf_info(work.reshape(-1), out.reshape(-1), batch, n)
