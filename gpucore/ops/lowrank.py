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


def _basis(A: Tensor, q: int, niter: int, M: Tensor | None) -> Tensor:
    """Q [*, m, q] with orthonormal columns such that Q Q^T (A - M) approximates A - M."""
    r = randn(A.shape[-1], q, dtype=A.dtype, device=A.device)
    x = A @ r if M is None else A @ r - M @ r
    Q = linalg_qr(x).Q
    for _ in range(niter):
        x = mT(A) @ Q if M is None else mT(A) @ Q - mT(M) @ Q
        Q = linalg_qr(x).Q
        x = A @ Q if M is None else A @ Q - M @ Q
        Q = linalg_qr(x).Q
    return Q


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
    range finder with niter subspace iterations (torch's Algorithms 4.4 and 5.1 of Halko et
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
    if m < n:  # work on the tall orientation
        A = mT(A)
        M = None if M is None else mT(M)
    Q = _basis(A, q, niter, M)
    B = mT(Q) @ A if M is None else mT(Q) @ A - mT(Q) @ M
    U, S, Vh = linalg_svd(B, full_matrices=False)
    V = mT(Vh)
    U = Q @ U
    if m < n:
        U, V = V, U
    return LowRank(U, S, V)


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
