"""Matrix functions: the bodies of ``gpucore.linalg`` (torch.linalg's names) and the top-level
forms PyTorch also has (det, logdet, slogdet, inverse, pinverse, cholesky, matrix_exp, qr,
svd). Decompositions are the ops of ops/decompositions.py (numpy's LAPACK on the CPU); norms,
pinv, matrix_rank, matrix_exp and multi_dot are compositions.

kernels: those of ops/decompositions.py.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import broadcast_shapes, norm_dims, tensor_list
from .decompositions import (
    CHOLESKY,
    DET,
    EIGH,
    INV,
    QR,
    SLOGDET,
    SOLVE,
    SVD,
    check_square,
    mT,
    qr_shapes,
    svd_shapes,
    unpack,
)
from .elementwise import where
from .products import cross3
from .reduce import _safe_root
from .registry import apply

SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])
QRResult = namedtuple("qr", ["Q", "R"])
SVDResult = namedtuple("svd", ["U", "S", "Vh"])
SVDOld = namedtuple("svd", ["U", "S", "V"])
EighResult = namedtuple("eigh", ["eigenvalues", "eigenvectors"])


def inv(A: Tensor) -> Tensor:
    """The inverse of each square matrix (LinAlgError when singular), as torch.linalg.inv."""
    check_square("inv", A)
    return apply(INV, A)


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """X with ``A X = B`` (``X A = B`` when left=False), batch dims broadcast; B may be a vector
    (or a batch of vectors), as torch.linalg.solve."""
    check_square("solve", A)
    if B.dtype is not A.dtype:
        raise DTypeError(f"linalg.solve: A ({A.dtype}) and B ({B.dtype}) must have one dtype")
    if not left:
        return mT(solve(mT(A), mT(B)))
    vec = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    b = B.unsqueeze(-1) if vec else B
    if b.shape[-2] != A.shape[-1]:
        raise ShapeError(
            f"linalg.solve: A {tuple(A.shape)} and B {tuple(B.shape)} do not fit (B needs "
            f"{A.shape[-1]} rows)"
        )
    batch = broadcast_shapes("linalg.solve", A.shape[:-2], b.shape[:-2])
    a = A.expand(batch + tuple(A.shape[-2:]))
    b = b.expand(batch + tuple(b.shape[-2:]))
    x = apply(SOLVE, a, b)
    return x.squeeze(-1) if vec else x


@public("det")
def det(input: Tensor) -> Tensor:
    """The determinant of each square matrix, as torch.det (the gradient needs an invertible
    matrix)."""
    check_square("det", input)
    return apply(DET, input)


@public("slogdet")
def slogdet(input: Tensor) -> tuple:
    """(sign, log|det|) of each square matrix, as torch.slogdet (sign 0 and -inf when
    singular)."""
    check_square("slogdet", input)
    la, s = apply(SLOGDET, input)
    return SlogdetResult(s, la)


@public("logdet")
def logdet(input: Tensor) -> Tensor:
    """log(det): NaN where the determinant is negative, -inf where it is 0, as torch.logdet."""
    s, la = slogdet(input)
    return where(s < 0, float("nan"), la)


@public("inverse")
def inverse(input: Tensor) -> Tensor:
    """torch.inverse: linalg.inv."""
    return inv(input)


def cholesky_ex(A: Tensor, upper: bool = False) -> Tensor:
    check_square("cholesky", A)
    low = apply(CHOLESKY, A)
    return mT(low) if upper else low


@public("cholesky")
def cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """The Cholesky factor L (``A = L L^T``; U with upper=True) of symmetric positive-definite
    matrices (reading the lower triangle), as torch.cholesky / torch.linalg.cholesky (an empty
    input comes back as it is, as torch.cholesky)."""
    if input.numel() == 0 and input.ndim >= 2:
        return input.clone()
    return cholesky_ex(input, upper)


def linalg_qr(A: Tensor, mode: str = "reduced") -> tuple:
    """(Q, R) with ``A = Q R``, as torch.linalg.qr (mode 'reduced', 'complete' or 'r'; the
    gradient for m >= n in 'reduced' mode)."""
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    check_square("qr", A, square=False)
    m, n = A.shape[-2], A.shape[-1]
    lapack_mode = "complete" if mode == "complete" else "reduced"
    q, r = unpack(apply(QR, A, mode=lapack_mode), qr_shapes(m, n, lapack_mode))
    return QRResult(A.new_empty(0) if mode == "r" else q, r)


@public("qr")
def qr(input: Tensor, some: bool = True) -> tuple:
    """torch.qr: linalg.qr in mode 'reduced' (some=True) or 'complete'."""
    return linalg_qr(input, "reduced" if some else "complete")


def linalg_svd(A: Tensor, full_matrices: bool = True) -> tuple:
    """(U, S, Vh) with ``A = U diag(S) Vh``, S descending, as torch.linalg.svd (the gradient
    needs full_matrices=False or square matrices, and distinct nonzero singular values)."""
    check_square("svd", A, square=False)
    m, n = A.shape[-2], A.shape[-1]
    packed = apply(SVD, A, full_matrices=bool(full_matrices), shape=(m, n))
    return SVDResult(*unpack(packed, svd_shapes(m, n, bool(full_matrices))))


@public("svd")
def svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> tuple:
    """torch.svd: (U, S, V) with ``A = U diag(S) V^T`` (V, not Vh); reduced when some=True."""
    u, s, vh = linalg_svd(input, full_matrices=not some)
    if not compute_uv:
        return SVDOld(u.new_zeros(u.shape), s, vh.new_zeros(tuple(vh.shape)))
    return SVDOld(u, s, mT(vh))


def svdvals(A: Tensor) -> Tensor:
    """The singular values, descending, as torch.linalg.svdvals."""
    return linalg_svd(A, full_matrices=False)[1]


def eigh(A: Tensor, UPLO: str = "L") -> tuple:  # noqa: N803 - PyTorch's name
    """(eigenvalues ascending, eigenvectors as columns) of symmetric matrices, reading the
    ``UPLO`` triangle, as torch.linalg.eigh."""
    if UPLO not in ("L", "U"):
        raise ValueError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    check_square("eigh", A)
    n = A.shape[-1]
    w, q = unpack(apply(EIGH, A, uplo=UPLO, n=n), [(n,), (n, n)])
    return EighResult(w, q)


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:  # noqa: N803
    """The eigenvalues of symmetric matrices, ascending, as torch.linalg.eigvalsh."""
    return eigh(A, UPLO)[0]


def _tolerance(s: Tensor, m: int, n: int, atol, rtol) -> Tensor:
    """max(atol, rtol * largest singular value), PyTorch's defaults (rtol = eps * max(m, n) when
    neither is given or atol is 0)."""
    if rtol is None:
        rtol = float(np.finfo(s.dtype.np).eps) * max(m, n) if not atol else 0.0
    smax = s.amax(-1, keepdim=True) if s.shape[-1] else s.sum(-1, keepdim=True)
    tol = smax * rtol
    if atol:
        tol = where(tol > atol, tol, float(atol))
    return tol


def pinv(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """The Moore-Penrose pseudo-inverse through the SVD (singular values at or below the
    tolerance count as 0), as torch.linalg.pinv (gradients for full-rank matrices)."""
    check_square("pinv", A, square=False)
    m, n = A.shape[-2], A.shape[-1]
    u, s, vh = linalg_svd(A, full_matrices=False)
    keep = s > _tolerance(s, m, n, atol, rtol)
    sinv = where(keep, 1 / where(keep, s, 1.0), 0.0)
    return (mT(vh) * sinv.unsqueeze(-2)) @ mT(u)


@public("pinverse")
def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """torch.pinverse: linalg.pinv with rtol=rcond."""
    return pinv(input, rtol=rcond)


def matrix_rank(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """The number of singular values above the tolerance (int64), as torch.linalg.matrix_rank."""
    check_square("matrix_rank", A, square=False)
    s = svdvals(A.detach())
    return (s > _tolerance(s, A.shape[-2], A.shape[-1], atol, rtol)).sum(-1)


@public("matrix_exp")
def matrix_exp(input: Tensor) -> Tensor:
    """exp of square matrices by scaling and squaring: ``A / 2^s`` (norm <= 1/2) through its
    Taylor series to degree 18, squared s times (a composition: differentiable, any backend)."""
    check_square("matrix_exp", input)
    n = input.shape[-1]
    if input.numel() == 0:
        return input.clone()
    norm1 = float(input.detach().abs().sum(-2).amax())
    s = max(0, math.ceil(math.log2(norm1)) + 1) if norm1 > 0 and math.isfinite(norm1) else 0
    x = input * (0.5**s)
    eye = input.new_zeros(n, n) + _eye(input, n)
    term, total = eye, eye
    for k in range(1, 19):
        term = (term @ x) * (1.0 / k)
        total = total + term
    for _ in range(s):
        total = total @ total
    return total


def _eye(a: Tensor, n: int) -> Tensor:
    from .decompositions import _eye_like  # noqa: PLC0415

    return _eye_like(a, n)


def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The vector ``ord``-norm over ``dim`` (all elements when None): inf/-inf (max/min of
    |x|), 0 (nonzeros), any other number (``sum |x|^ord ^ (1/ord)``), as
    torch.linalg.vector_norm (float tensors; the gradient at 0 is 0)."""
    if dtype is not None:
        x = x.to(dtype)
    if not x.dtype.is_floating_point:
        raise DTypeError(f"linalg.vector_norm: expected a float tensor, got {x.dtype}")
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise TypeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    dims = norm_dims(dim, x.ndim, "linalg.vector_norm")
    a = x.abs()
    if ord == math.inf:
        return a.amax(dims, keepdim) if x.numel() else a.sum(dims, keepdim)
    if ord == -math.inf:
        return a.amin(dims, keepdim)
    if ord == 0:  # the count of nonzeros, with PyTorch's zero gradient
        return where(x != 0, 1.0, x * 0).sum(dims, keepdim)
    if ord == 2:
        return _safe_root((x * x).sum(dims, keepdim), 0.5)
    if ord == 1:
        return a.sum(dims, keepdim)
    if ord > 0:
        return _safe_root((a**ord).sum(dims, keepdim), 1.0 / ord)
    return (a**ord).sum(dims, keepdim) ** (1.0 / ord)


def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None):
    """The matrix norm over the two dims ``dim``: 'fro', 'nuc', 1/-1 (max/min column sum),
    inf/-inf (row sum), 2/-2 (largest/smallest singular value), as torch.linalg.matrix_norm."""
    if dtype is not None:
        A = A.to(dtype)
    if not A.dtype.is_floating_point:
        raise DTypeError(f"linalg.matrix_norm: expected a float tensor, got {A.dtype}")
    if A.ndim < 2:
        raise ShapeError(f"linalg.matrix_norm: expected a matrix, got {A.ndim}-D")
    d0, d1 = norm_dims(dim[0], A.ndim, "matrix_norm")[0], norm_dims(dim[1], A.ndim, "")[0]
    if d0 == d1:
        raise ValueError(f"linalg.matrix_norm: dims must be different, got {dim}")
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        moved = A.movedim(max(d0, d1), -1).movedim(min(d0, d1), -2)
        s = svdvals(moved)
        out = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
        if keepdim:
            for d in sorted((d0, d1)):
                out = out.unsqueeze(d)
        return out
    if ord in (1, -1, math.inf, -math.inf):
        first, second = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = A.abs().sum(first, keepdim=True)
        out = sums.amax(second, True) if ord > 0 else sums.amin(second, True)
        return out if keepdim else out.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    raise ValueError(f"linalg.matrix_norm: order {ord!r} is not supported")


def norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """torch.linalg.norm: a vector norm (dim an int, or a 1-D input), a matrix norm (dim a pair,
    or a 2-D input with ord given), or the 2-norm of all elements (ord and dim None)."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is not None:
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    raise ValueError(f"linalg.norm: input must be 1-D or 2-D when ord is given, got {A.ndim}-D")


def multi_dot(tensors) -> Tensor:
    """The product of a chain of matrices (the first may be a row vector, the last a column
    vector), as torch.linalg.multi_dot."""
    ts = tensor_list("linalg.multi_dot", tensors)
    if len(ts) < 2:
        raise ValueError(f"linalg.multi_dot: expected at least 2 tensors, got {len(ts)}")
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    mats = [ts[0].unsqueeze(0) if first_vec else ts[0]]
    mats += ts[1:-1] + [ts[-1].unsqueeze(-1) if last_vec else ts[-1]]
    for i, t in enumerate(mats):
        if t.ndim != 2:
            raise ShapeError(f"linalg.multi_dot: tensor {i} must be 2-D, got {t.ndim}-D")
    out = mats[0]
    for t in mats[1:]:
        out = out @ t
    if last_vec:
        out = out.squeeze(-1)
    if first_vec:
        out = out.squeeze(0)
    return out


def linalg_cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product along dim (default the last), as torch.linalg.cross."""
    return cross3(input, other, dim, "linalg.cross")
