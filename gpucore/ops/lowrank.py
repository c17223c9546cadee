"""Randomized low-rank decompositions as compositions, as torch.svd_lowrank and
torch.pca_lowrank (Halko, Martinsson and Tropp 2009: a Gaussian test matrix drawn from
gpucore's random stream, so gpucore.manual_seed makes them repeatable; niter subspace
iterations, each re-orthonormalized by QR; the SVD of the small projected matrix). Matrix
products, QR and SVD only: they run wherever those run and autograd differentiates them.

kernels: none (the composed ops').
"""

from __future__ import annotations

import operator
from collections import namedtuple

from .. import dtypes as D
from ..errors import ShapeError
from ..tensor import Tensor
from .api import public
from .decompositions import mT
from .matrix import linalg_qr, linalg_svd
from .random import randn

LowRank = namedtuple("svd_lowrank", ["U", "S", "V"])


def _float(A: Tensor) -> Tensor:
    return A if A.dtype in (D.float32, D.float64) else A.to(D.float32)


def _range_basis(C: Tensor, q: int, niter: int) -> Tensor:
    """Orthonormal columns [*, rows, q] spanning (approximately) the dominant column space of C:
    Halko et al.'s randomized range finder (a Gaussian sketch C @ Omega, orthonormalized) refined
    by niter rounds of subspace iteration with (C C^T), each half-step re-orthonormalized by QR so
    that the small singular values do not drown in rounding."""

    def orth(y: Tensor) -> Tensor:
        return linalg_qr(y).Q

    sketch = randn(C.shape[-1], q, dtype=C.dtype, device=C.device)
    basis = orth(C @ sketch)
    for _ in range(niter):
        basis = orth(C @ orth(mT(C) @ basis))
    return basis


def _check(op: str, A: Tensor, q, niter) -> tuple:
    if A.ndim < 2:
        raise ShapeError(f"{op}(): A must be a matrix or a batch of matrices, got {A.ndim}-D")
    if isinstance(q, bool) or isinstance(niter, bool):
        raise TypeError(f"{op}(): q and niter must be integers")
    q, niter = operator.index(q), operator.index(niter)
    if niter < 0:
        raise ValueError(f"{op}(): niter(={niter}) must be non-negative integer")
    return q, niter


@public("svd_lowrank", method=False)
def svd_lowrank(A: Tensor, q: int | None = 6, niter: int | None = 2, M: Tensor | None = None):
    """(U [*, m, q], S [*, q], V [*, n, q]) with ``A - M ~ U diag(S) V^T`` (M, if given,
    broadcast to A), q a slightly overestimated rank of A, as torch.svd_lowrank: the randomized
    range finder with niter subspace iterations (Algorithms 4.4 and 5.1 of Halko et
    al.). Repeatable through gpucore.manual_seed."""
    q = 6 if q is None else q
    niter = 2 if niter is None else niter
    q, niter = _check("svd_lowrank", A, q, niter)
    A = _float(A)
    m, n = A.shape[-2], A.shape[-1]
    if q < 0:  # a q above min(m, n) gives min(m, n) components, as PyTorch
        raise ValueError(f"svd_lowrank(): q(={q}) must be a non-negative integer")
    if M is not None:
        M = _float(M).to(A.dtype).expand(tuple(A.shape))
    C = A if M is None else A - M  # the matrix to approximate
    if m >= n:  # C ~ Q Q^T C with Q spanning its columns; SVD of the small [q, n] Q^T C
        Q = _range_basis(C, q, niter)
        small_u, S, Vh = linalg_svd(mT(Q) @ C, full_matrices=False)
        return LowRank(Q @ small_u, S, mT(Vh))
    # wide: C ~ C P P^T with P spanning its rows; SVD of the small [m, q] C P
    P = _range_basis(mT(C), q, niter)
    U, S, small_vh = linalg_svd(C @ P, full_matrices=False)
    return LowRank(U, S, P @ mT(small_vh))


@public("pca_lowrank", method=False)
def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True, niter: int = 2):
    """(U, S, V) of a principal component analysis of the data A [*, m, n] (m samples, n
    features): svd_lowrank of A minus its column means (center=True), q = min(6, m, n) by
    default, as torch.pca_lowrank. V's columns are the principal directions, S**2 / (m - 1) the
    variances along them."""
    if A.ndim < 2:
        raise ShapeError(
            f"pca_lowrank(): A must be a matrix or a batch of matrices, got {A.ndim}-D"
        )
    m, n = A.shape[-2], A.shape[-1]
    q = min(6, m, n) if q is None else q
    q, niter = _check("pca_lowrank", A, q, niter)
    if not 0 <= q <= min(m, n):
        raise ValueError(
            f"pca_lowrank(): q(={q}) must be non-negative integer and not greater than "
            f"min(m, n)={min(m, n)}"
        )
    A = _float(A)
    if center:
        A = A - A.mean(dim=-2, keepdim=True)
    return svd_lowrank(A, q, niter=niter)
