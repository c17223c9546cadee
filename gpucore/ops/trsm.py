"""Triangular solves as one op (TRSM: linalg.solve_triangular, triangular_solve and
cholesky_solve run it) with PyTorch's backward, and the LU factorization's info codes (lu_info:
linalg.inv_ex / solve_ex's ``info``).

``linalg_solve_triangular(a, b, upper, left, unitriangular, dense)`` solves ``T X = B`` (``X T =
B`` when not left) for T the ``upper`` or lower triangle of a (ones on the diagonal with
unitriangular), a and b of one batch shape. Its gradient with respect to a is PyTorch's: that of
T, masked to the triangle read (strictly, with unitriangular), or left dense with ``dense``
(cholesky_solve's factor gradient, PyTorch's). The backward solves with T^T: the same op on a's
transpose.

kernels: backends/cpu/kernels/trsm.py (cpu/trsm.c: blocked TRSM over the GEMM; partial-pivoting
LU in the element type) · none on Vulkan (device tensors go through the host).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from .decompositions import mT
from .registry import apply, defop
from .samples import Sample, uniform


def _np_triangle(a, upper, unitriangular):
    t = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        n = a.shape[-1]
        t = t * (1 - np.eye(n)) + np.eye(n)
    return t


def np_solve_triangular(a, b, upper, left, unitriangular, dense):
    """float64 reference: numpy's general solve on the triangle."""
    t = _np_triangle(a, upper, unitriangular)
    if left:
        return np.linalg.solve(t, b)
    return np.swapaxes(np.linalg.solve(np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)


def _mask(g, upper: bool, unitriangular: bool):
    if upper:
        return g.triu(1 if unitriangular else 0)
    return g.tril(-1 if unitriangular else 0)


def _trsm_bwd(ctx, g):
    a, x = ctx.saved
    at = ctx.attrs
    # T^-T: the same solve on a's transpose, whose other triangle is read
    gb = apply(TRSM, mT(a), g, upper=not at["upper"], left=at["left"],
               unitriangular=at["unitriangular"], dense=at["dense"])  # fmt: skip
    gt = -(gb @ mT(x)) if at["left"] else -(mT(x) @ gb)
    return (gt if at["dense"] else _mask(gt, at["upper"], at["unitriangular"])), gb


def _trsm_samples():
    a = uniform(2, 4, 4, seed=1) + 4 * np.eye(4)
    big = uniform(70, 70, seed=2) + 8 * np.eye(70)  # two diagonal blocks of the kernel
    return [
        Sample(a, uniform(2, 4, 3, seed=3), upper=False, left=True, unitriangular=False,
               dense=False, ref=np_solve_triangular),
        Sample(a, uniform(2, 3, 4, seed=4), upper=True, left=False, unitriangular=False,
               dense=False, ref=np_solve_triangular),
        Sample(a, uniform(2, 4, 2, seed=5), upper=True, left=True, unitriangular=True,
               dense=False, ref=np_solve_triangular),
        # dense: the gradient is not the forward's derivative off the triangle (PyTorch's
        # cholesky_solve factor gradient, checked against PyTorch in tests/ops/test_trsm.py)
        Sample(a, uniform(2, 4, 3, seed=6), upper=False, left=True, unitriangular=False,
               dense=True, ref=np_solve_triangular, grad=False),
        Sample(big, uniform(70, 5, seed=7), upper=False, left=True, unitriangular=False,
               dense=False, ref=np_solve_triangular, grad=False),
    ]  # fmt: skip


TRSM = defop(
    "linalg_solve_triangular",
    infer=lambda a, b, upper, left, unitriangular, dense: (b.shape, b.dtype),
    save_inputs=(0,),
    save_outputs=(0,),
    backward=_trsm_bwd,
    samples=_trsm_samples,
)


def np_lu_info(a):
    """float64 reference: getrf's info (the first exactly zero pivot, 1-based) per matrix."""
    mats = np.asarray(a, np.float64).reshape((-1,) + a.shape[-2:])
    out = []
    for m in mats:
        m = m.copy()
        n, info = m.shape[0], 0
        for j in range(n):
            p = j + int(np.argmax(np.abs(m[j:, j])))
            if m[p, j] == 0:
                info = info or j + 1
                continue
            m[[j, p]] = m[[p, j]]
            m[j + 1 :, j:] -= np.outer(m[j + 1 :, j] / m[j, j], m[j, j:])
        out.append(info)
    return np.asarray(out, np.int64).reshape(a.shape[:-2])


def _lu_samples():
    sing = np.array([[1.0, 2, 3, 4], [2, 4, 6, 8], [0, 0, 1, 0], [0, 1, 0, 0]])
    well = uniform(4, 4, seed=8) + 3 * np.eye(4)
    zero_col = well.copy()
    zero_col[:, 2] = 0
    return [
        Sample(np.stack([well, sing, np.zeros((4, 4)), zero_col]), ref=np_lu_info, grad=False),
        Sample(uniform(60, 60, seed=9), ref=np_lu_info, grad=False),  # two LU panels
    ]


LU_INFO = defop(
    "lu_info",
    infer=lambda a: (a.shape[:-2], D.int32),
    samples=_lu_samples,
)
