"""The LU factorization with partial pivoting, as PyTorch's linalg.lu_factor, lu_factor_ex, lu,
lu_solve and the older torch.lu, lu_unpack, lu_solve (functions and methods): LAPACK's getrf
rule (the largest magnitude of each column pivots, 1-based int32 pivots, info the first zero
pivot), on m x n matrices and batches.

The factorization is an op whose kernel runs on the host; its result is re-expressed in
gpucore ops so that autograd gives PyTorch's derivative of the factors with respect to A
(square, tall and wide matrices): a term zero in value carries ``L^-1 P^T dA U^-1`` split into
its strictly lower and upper parts. lu_unpack and lu_solve are compositions (tril / triu,
permutation matrices, triangular solves), so differentiable in LU and B.

kernels: backends/cpu/kernels/decompositions.py (square: cpu/trsm.c's LU in the input's dtype;
rectangular: getrf in numpy) · none on Vulkan.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes as D
from ..autograd.grad_mode import _state as _grad_state
from ..creation import eye
from ..creation import tensor as _tensor
from ..errors import DTypeError, LinAlgError, ShapeError
from ..tensor import Tensor
from .api import public
from .decompositions import check_square, mT
from .joining import cat
from .matrix import inv
from .rearrange import tril, triu
from .registry import apply, defop
from .samples import Sample, uniform
from .solvers import solve_triangular

LUFactor = namedtuple("lu_factor", ["LU", "pivots"])
LUFactorEx = namedtuple("lu_factor_ex", ["LU", "pivots", "info"])
LU = namedtuple("lu", ["P", "L", "U"])
LUUnpack = namedtuple("lu_unpack", ["P", "L", "U"])


def _factor_call(op, a):
    lu, piv, _info = apply(op, a)
    p, lo, up = lu_unpack(lu, piv)
    return p @ lo @ up


LU_FACTOR = defop(
    "linalg_lu_factor",
    infer=lambda a: [
        (a.shape, a.dtype),
        (a.shape[:-2] + (min(a.shape[-2], a.shape[-1]),), D.int32),
        (a.shape[:-2], D.int32),
    ],
    samples=lambda: [
        # checked through the reconstruction P L U, which must give A back
        Sample(uniform(4, 4, seed=1), ref=lambda a: a, call=_factor_call, grad=False),
        Sample(uniform(2, 5, 3, seed=2), ref=lambda a: a, call=_factor_call, grad=False),
        Sample(uniform(3, 5, seed=3), ref=lambda a: a, call=_factor_call, grad=False),
    ],
)


def _permutations(pivots: np.ndarray, m: int) -> np.ndarray:
    """[..., m] row orders ``perm`` with ``(P^T A)[i] = A[perm[i]]`` from LAPACK's sequential
    1-based swaps."""
    nb = int(np.prod(pivots.shape[:-1], dtype=np.int64))
    flat = pivots.reshape(nb, pivots.shape[-1]).astype(np.int64) - 1
    perms = np.tile(np.arange(m), (nb, 1))
    for b, row in enumerate(flat):
        for i, p in enumerate(row):
            perms[b, [i, p]] = perms[b, [p, i]]
    return perms.reshape(pivots.shape[:-1] + (m,))


def _p_matrices(pivots: Tensor, m: int, like: Tensor) -> Tensor:
    """The permutation matrices P [..., m, m] of pivots (A = P L U), in like's dtype."""
    p = np.asarray(pivots.cpu().numpy())
    if p.size and (p.min() < 1 or p.max() > m):
        raise ValueError(f"lu: pivots must be LAPACK's 1-based row indices in [1, {m}]")
    perm = _permutations(p, m)
    mats = np.zeros(perm.shape + (m,))
    np.put_along_axis(mats, perm[..., :, None], 1.0, axis=-1)  # P^T's rows
    return mT(_tensor(mats, dtype=like.dtype, device=like.device))


def _check_pivot(op: str, pivot) -> None:
    if not pivot:
        raise NotImplementedError(f"linalg.{op}: LU without pivoting is not implemented")


def _differentiable(A: Tensor, lu0: Tensor, pivots: Tensor) -> Tensor:
    """lu0 plus a zero-valued term whose derivative with respect to A is the factors'."""
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    pt = mT(_p_matrices(pivots, m, A))
    d = pt @ (A - A.detach())  # P^T dA, zero in value
    lo = tril(lu0[..., :, :k], -1) + eye(m, k, dtype=A.dtype, device=A.device)
    up = triu(lu0[..., :k, :])
    l1_inv, u1_inv = inv(lo[..., :k, :]), inv(up[..., :, :k])
    x = l1_inv @ d[..., :k, :k] @ u1_inv
    dl1, du1 = lo[..., :k, :] @ tril(x, -1), triu(x) @ up[..., :, :k]
    if m > n:  # the rows below: dL2 = (dA2 - L2 dU) U^-1
        dl = cat([dl1, (d[..., k:, :] - lo[..., k:, :] @ du1) @ u1_inv], -2)
        du = cat([du1, du1.new_zeros(du1.shape[:-2] + (m - k, n))], -2)
    elif n > m:  # the columns right: dU2 = L^-1 (dA2 - dL U2)
        du = cat([du1, l1_inv @ (d[..., :, k:] - dl1 @ up[..., :, k:])], -1)
        dl = cat([dl1, dl1.new_zeros(dl1.shape[:-2] + (m, n - k))], -1)
    else:
        dl, du = dl1, du1
    return lu0 + tril(dl, -1) + triu(du)


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False) -> tuple:
    """(LU, pivots, info) of ``A = P L U`` for A [*, m, n], as torch.linalg.lu_factor_ex: L's
    strict lower part and U in LU, LAPACK's 1-based int32 pivots, info the 1-based index of
    the first zero pivot (0 when none; check_errors=True raises instead). Differentiable in A."""
    _check_pivot("lu_factor_ex", pivot)
    check_square("lu_factor_ex", A, square=False)
    lu, pivots, info = apply(LU_FACTOR, A)
    if check_errors:
        _raise_on(info, "lu_factor_ex")
    if _grad_state.enabled and A._requires_grad:
        lu = _differentiable(A, lu, pivots)
    return LUFactorEx(lu, pivots, info)


def _raise_on(info: Tensor, op: str) -> None:
    codes = info.numpy().reshape(-1)
    bad = np.flatnonzero(codes)
    if bad.size:
        i = int(codes[bad[0]])
        raise LinAlgError(
            f"linalg.{op}: U[{i},{i}] is zero and using it on lu_solve would result in a "
            "division by zero; linalg.lu_factor_ex reports it in info instead"
        )


def lu_factor(A: Tensor, *, pivot: bool = True) -> tuple:
    """(LU, pivots) of ``A = P L U``, as torch.linalg.lu_factor; a zero pivot raises
    LinAlgError (lu_factor_ex reports it instead)."""
    lu, pivots, info = lu_factor_ex(A, pivot=pivot)
    _raise_on(info, "lu_factor")
    return LUFactor(lu, pivots)


@public("lu_unpack", method=False)
def lu_unpack(
    LU_data: Tensor,  # noqa: N803 - PyTorch's names
    LU_pivots: Tensor,  # noqa: N803
    unpack_data: bool = True,
    unpack_pivots: bool = True,
) -> tuple:
    """(P [*, m, m], L [*, m, k], U [*, k, n]) from lu_factor's (LU, pivots), as
    torch.lu_unpack (empty tensors for the parts not asked for); L and U are differentiable."""
    if LU_data.ndim < 2:
        raise ShapeError(
            f"lu_unpack(): LU_data must be a matrix or a batch of matrices, got shape "
            f"{tuple(LU_data.shape)}"
        )
    if LU_pivots.dtype not in (D.int32, D.int64):
        raise DTypeError(f"lu_unpack(): LU_pivots must be int32, got {LU_pivots.dtype}")
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    if LU_pivots.ndim < 1 or LU_pivots.shape[-1] != k:
        raise ShapeError(
            f"lu_unpack(): LU_pivots {tuple(LU_pivots.shape)} must have {k} = min(m, n) "
            f"entries for LU_data {tuple(LU_data.shape)}"
        )
    empty = LU_data.new_empty(0)
    p = _p_matrices(LU_pivots, m, LU_data) if unpack_pivots else empty
    if not unpack_data:
        return LUUnpack(p, empty, empty)
    lo = tril(LU_data[..., :, :k], -1) + eye(m, k, dtype=LU_data.dtype, device=LU_data.device)
    return LUUnpack(p, lo, triu(LU_data[..., :k, :]))


def linalg_lu(A: Tensor, *, pivot: bool = True) -> tuple:
    """(P, L, U) with ``A = P L U``, as torch.linalg.lu (differentiable in A)."""
    _check_pivot("lu", pivot)
    lu, pivots, _ = lu_factor_ex(A)
    return LU(*lu_unpack(lu, pivots))


def lu_solve(
    LU: Tensor,  # noqa: N803 - PyTorch's name
    pivots: Tensor,
    B: Tensor,  # noqa: N803
    *,
    left: bool = True,
    adjoint: bool = False,
) -> Tensor:
    """X with ``A X = B`` (``X A = B`` when left=False; A^T for adjoint=True) from lu_factor's
    (LU, pivots) of a square A, batch dims broadcast, as torch.linalg.lu_solve: triangular
    solves, so differentiable in LU and B."""
    check_square("lu_solve", LU)
    if B.ndim < 2 or B.dtype is not LU.dtype:
        raise ShapeError(
            f"linalg.lu_solve: B must be a matrix or batch of matrices of LU's dtype "
            f"({LU.dtype}), got shape {tuple(B.shape)} and {B.dtype}"
        )
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise ShapeError(
            f"linalg.lu_solve: LU {tuple(LU.shape)} and B {tuple(B.shape)} do not fit (B needs "
            f"{n} {'rows' if left else 'columns'})"
        )
    p, lo, up = lu_unpack(LU, pivots)
    if left and not adjoint:  # X = U^-1 L^-1 P^T B
        y = solve_triangular(lo, mT(p) @ B, upper=False, unitriangular=True)
        return solve_triangular(up, y, upper=True)
    if left:  # A^T = U^T L^T P^T: X = P L^-T U^-T B
        y = solve_triangular(mT(up), B, upper=False)
        return p @ solve_triangular(mT(lo), y, upper=True, unitriangular=True)
    if not adjoint:  # X = B U^-1 L^-1 P^T
        y = solve_triangular(up, B, upper=True, left=False)
        return solve_triangular(lo, y, upper=False, left=False, unitriangular=True) @ mT(p)
    y = B @ p  # X A^T = B: X = B P L^-T U^-T
    y = solve_triangular(mT(lo), y, upper=True, left=False, unitriangular=True)
    return solve_triangular(mT(up), y, upper=False, left=False)


@public("lu")
def lu(A: Tensor, pivot: bool = True, get_infos: bool = False) -> tuple:
    """torch.lu / Tensor.lu: (LU, pivots), and info with get_infos=True (no error then)."""
    _check_pivot("lu", pivot)
    lu_, pivots, info = lu_factor_ex(A)
    if get_infos:
        return lu_, pivots, info
    _raise_on(info, "lu")
    return lu_, pivots


@public("lu_solve")
def lu_solve_old(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:  # noqa: N803
    """torch.lu_solve / Tensor.lu_solve: linalg.lu_solve(LU_data, LU_pivots, b)."""
    return lu_solve(LU_data, LU_pivots, b)
