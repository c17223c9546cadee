"""Kernels of gpucore/ops/trsm.py on cpu/trsm.c: the blocked triangular solve (a right-hand side
solved in place in ``out``; a right solve ``X T = B`` as ``T^T X^T = B^T`` on a transposed copy)
and the info codes of a partial-pivoting LU in the element's own type; ``lu_solve``, the LU and
two triangular solves, for ops/decompositions.py's inv and solve kernels."""

from __future__ import annotations

import math

import numpy as np

from .... import _cpu
from ....errors import LinAlgError
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


def lu_factor(op: str, a: np.ndarray):
    """(LU [batch, n, n], perm [batch, n], info [batch]) of a [..., n, n] by cpu/trsm.c's
    partial-pivoting LU in a's dtype (``P A = L U``; row i of P A is row perm[i] of A)."""
    n = a.shape[-1]
    batch = math.prod(a.shape[:-2])
    lu = np.array(a, order="C").reshape(batch, n, n)  # a copy: the LU overwrites it
    perm = np.empty((batch, n), np.int32)
    info = np.empty(batch, np.int32)
    if batch:
        _cpu.getrf(lu.reshape(-1), perm.reshape(-1), info, batch, n)
    return lu, perm, info


def lu_solve(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """X [batch, n, k] with ``A X = B`` for a [..., n, n], b [..., n, k] of one batch shape:
    the LU, B's rows permuted, then a unit-lower and an upper triangular solve. A singular
    matrix (a zero pivot) raises LinAlgError naming ``op``, as numpy's LAPACK."""
    lu, perm, info = lu_factor(op, a)
    bad = np.flatnonzero(info)
    if bad.size:
        raise LinAlgError(
            f"linalg.{op}: the input matrix is singular (batch element {int(bad[0])}: a zero "
            f"pivot at column {int(info[bad[0]])})"
        )
    batch, n = lu.shape[0], lu.shape[-1]
    k = b.shape[-1]
    x = np.take_along_axis(b.reshape(batch, n, k), perm[:, :, None].astype(np.intp), axis=1)
    x = np.ascontiguousarray(x, a.dtype)
    _cpu.trsm(lu.reshape(-1), x.reshape(-1), batch, n, k, n * n, 0, 0, 1)
    _cpu.trsm(lu.reshape(-1), x.reshape(-1), batch, n, k, n * n, 1, 0, 0)
    return x


@kernel("lu_info")
def _lu_info(out, a):
    np.copyto(out.reshape(-1), lu_factor("inv_ex", a)[2])
