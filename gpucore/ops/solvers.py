"""Triangular and Cholesky solves and the linalg names around them: linalg.solve_triangular,
triangular_solve and cholesky_solve on ops/trsm.py's blocked triangular solve (the gradient with
respect to A is PyTorch's: masked to the triangle read, dense for cholesky_solve's factor),
cholesky_inverse; linalg.cholesky_ex / inv_ex / solve_ex (an ``info`` tensor instead of an
error: inv_ex's and solve_ex's from ops/trsm.py's LU in the input's dtype, LAPACK's getrf info),
linalg.cond, tensorinv, tensorsolve; vander / linalg.vander (cumulative products: exact
gradients at 0), chain_matmul; linalg.lstsq (through pinv, with PyTorch's residuals, rank and
singular values per driver).

kernels: those of ops/trsm.py (cpu/trsm.c) and ops/decompositions.py (numpy's LAPACK).
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .. import dtypes as D
from ..creation import eye
from ..creation import tensor as _tensor
from ..errors import DTypeError, LinAlgError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import broadcast_shapes
from .decompositions import check_square, mT
from .elementwise import where
from .joining import cat
from .matrix import cholesky_ex as _cholesky
from .matrix import inv, matrix_norm, multi_dot, pinv, solve, svdvals
from .registry import apply
from .scan import cumprod
from .trsm import LU_INFO, TRSM

TriangularSolve = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])
CholeskyEx = namedtuple("cholesky_ex", ["L", "info"])
InvEx = namedtuple("inv_ex", ["inverse", "info"])
SolveEx = namedtuple("solve_ex", ["result", "info"])


def _trsm(name: str, A: Tensor, B: Tensor, upper: bool, left: bool, unit: bool, dense: bool):
    """The triangular solve op over A's and B's batch dims broadcast."""
    batch = broadcast_shapes(name, A.shape[:-2], B.shape[:-2])
    a = A.expand(batch + tuple(A.shape[-2:]))
    b = B.expand(batch + tuple(B.shape[-2:]))
    return apply(TRSM, a, b, upper=bool(upper), left=bool(left), unitriangular=bool(unit),
                 dense=dense)  # fmt: skip


def solve_triangular(
    A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False
) -> Tensor:
    """X with ``A X = B`` (``X A = B`` when left=False) for triangular A (only its ``upper`` or
    lower triangle is read; ones on the diagonal with unitriangular), batch dims broadcast, as
    torch.linalg.solve_triangular. A zero on the diagonal gives inf / NaN, as PyTorch."""
    check_square("solve_triangular", A)
    if B.ndim < 2:
        raise ShapeError(
            f"linalg.solve_triangular: B must be a matrix or a batch of matrices, got shape "
            f"{tuple(B.shape)} (use B.unsqueeze(-1) for a vector)"
        )
    if B.dtype is not A.dtype:
        raise DTypeError(
            f"linalg.solve_triangular: A ({A.dtype}) and B ({B.dtype}) must have one dtype"
        )
    k = B.shape[-2] if left else B.shape[-1]
    if k != A.shape[-1]:
        raise ShapeError(
            f"linalg.solve_triangular: A {tuple(A.shape)} and B {tuple(B.shape)} do not fit "
            f"(B needs {A.shape[-1]} {'rows' if left else 'columns'})"
        )
    return _trsm("linalg.solve_triangular", A, B, upper, left, unitriangular, False)


@public("triangular_solve")
def triangular_solve(
    input: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
    unitriangular: bool = False,
) -> tuple:  # fmt: skip
    """(X, A.clone()) with ``A X = input`` (``A^T X = input`` when transpose) for triangular A,
    as torch.triangular_solve (deprecated there in favour of linalg.solve_triangular)."""
    if transpose:
        check_square("triangular_solve", A)
        x = solve_triangular(mT(A), input, upper=not upper, unitriangular=unitriangular)
    else:
        x = solve_triangular(A, input, upper=upper, unitriangular=unitriangular)
    return TriangularSolve(x, A.clone())


@public("cholesky_solve")
def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False) -> Tensor:
    """X with ``A X = input`` where ``A = L L^T`` for the Cholesky factor L = input2 (``U^T U``
    with upper=True), batch dims broadcast, as torch.cholesky_solve."""
    check_square("cholesky_solve", input2)
    if input.ndim < 2:
        raise ShapeError(
            f"cholesky_solve: input must be a matrix or a batch of matrices, got shape "
            f"{tuple(input.shape)}"
        )
    if input.dtype is not input2.dtype:
        raise DTypeError(
            f"cholesky_solve: input ({input.dtype}) and input2 ({input2.dtype}) must have one dtype"
        )
    if input.shape[-2] != input2.shape[-1]:
        raise ShapeError(
            f"cholesky_solve: input {tuple(input.shape)} and input2 {tuple(input2.shape)} do "
            f"not fit (input needs {input2.shape[-1]} rows)"
        )
    # Only the factor's triangle is read, but the gradient is PyTorch's dense one (that of
    # (L L^T)^-1 B as a function of the whole L): the solves' dense form.
    low = mT(input2) if upper else input2
    y = _trsm("cholesky_solve", low, input, False, True, False, True)
    return _trsm("cholesky_solve", mT(low), y, True, True, False, True)


@public("cholesky_inverse")
def cholesky_inverse(input: Tensor, upper: bool = False) -> Tensor:
    """The inverse of ``A = L L^T`` from its Cholesky factor L = input (``U^T U`` with
    upper=True), batches too, as torch.cholesky_inverse."""
    check_square("cholesky_inverse", input)
    n = input.shape[-1]
    ident = eye(n, dtype=input.dtype, device=input.device).expand(tuple(input.shape))
    return cholesky_solve(ident, input, upper)


# ----------------------------------------------------------------------------- *_ex forms
def _matrices(A: Tensor) -> np.ndarray:
    return np.asarray(A.detach().cpu().numpy(), np.float64).reshape((-1,) + tuple(A.shape[-2:]))


def _info(A: Tensor, codes: list) -> Tensor:
    return _tensor(np.asarray(codes, np.int32).reshape(tuple(A.shape[:-2])), device=A.device)


def _lu_codes(A: Tensor) -> list:
    """getrf's info per matrix (ops/trsm.py's LU in A's dtype), flattened over the batch."""
    return apply(LU_INFO, A.detach()).cpu().numpy().reshape(-1).tolist()


def _chol_info(m: np.ndarray) -> int:
    """potrf's info: 0, or the order of the first leading minor that is not positive-definite."""
    try:
        np.linalg.cholesky(m)
        return 0
    except np.linalg.LinAlgError:
        pass
    for k in range(1, m.shape[0] + 1):
        try:
            np.linalg.cholesky(m[:k, :k])
        except np.linalg.LinAlgError:
            return k
    return m.shape[0]


def _masked(A: Tensor, codes: list) -> Tensor:
    """A with the failed matrices replaced by identities (so the factorization runs)."""
    bad = _tensor(np.asarray(codes).reshape(tuple(A.shape[:-2]) + (1, 1)) != 0, device=A.device)
    return where(bad, eye(A.shape[-1], dtype=A.dtype, device=A.device), A), bad


def _check(op: str, codes: list, what: str) -> None:
    bad = [i for i, c in enumerate(codes) if c]
    if bad:
        raise LinAlgError(f"linalg.{op}: {what} (batch element {bad[0]}, info {codes[bad[0]]})")


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> tuple:
    """(L, info) as torch.linalg.cholesky_ex: info (int32, one per matrix) is 0 or the order of
    the leading minor that is not positive-definite; such a matrix's L is zeros here (PyTorch
    leaves a partial factor) and nothing raises unless check_errors."""
    check_square("cholesky_ex", A)
    codes = [_chol_info(m) for m in _matrices(A)] if A.numel() else []
    if check_errors:
        _check("cholesky_ex", codes, "the input is not positive-definite")
    if not any(codes):
        return CholeskyEx(_cholesky(A, upper) if A.numel() else A.clone(), _info(A, codes))
    safe, bad = _masked(A, codes)
    return CholeskyEx(where(bad, 0.0, _cholesky(safe, upper)), _info(A, codes))


def inv_ex(A: Tensor, *, check_errors: bool = False) -> tuple:
    """(inverse, info) as torch.linalg.inv_ex: info (int32, one per matrix) is 0 or the 1-based
    index of the first zero pivot of its LU factorization; a singular matrix's inverse is NaN
    here (PyTorch's is undefined) and nothing raises unless check_errors."""
    check_square("inv_ex", A)
    if A.numel():
        try:  # inv's LU is lu_info's (the same C code): no zero pivot there, every info is 0
            return InvEx(inv(A), _info(A, [0] * math.prod(A.shape[:-2])))
        except LinAlgError:
            pass
    codes = _lu_codes(A)
    if check_errors:
        _check("inv_ex", codes, "the input is singular")
    if not any(codes):
        return InvEx(inv(A) if A.numel() else A.clone(), _info(A, codes))
    safe, bad = _masked(A, codes)
    return InvEx(where(bad, float("nan"), inv(safe)), _info(A, codes))


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False) -> tuple:
    """(X, info) as torch.linalg.solve_ex: info as inv_ex's (per matrix of A); a singular
    system's X is NaN here and nothing raises unless check_errors."""
    check_square("solve_ex", A)
    if A.numel():
        try:  # as inv_ex: one LU when no matrix is singular
            return SolveEx(solve(A, B, left=left), _info(A, [0] * math.prod(A.shape[:-2])))
        except LinAlgError:
            pass
    codes = _lu_codes(A)
    if check_errors:
        _check("solve_ex", codes, "the input is singular")
    if not any(codes):
        return SolveEx(solve(A, B, left=left), _info(A, codes))
    safe, bad = _masked(A, codes)
    x = solve(safe, B, left=left)
    vec = x.ndim < 2 or x.ndim == A.ndim - 1
    mask = bad.squeeze(-1) if vec else bad
    return SolveEx(where(mask, float("nan"), x), _info(A, codes))


def cond(A: Tensor, p=None) -> Tensor:
    """The condition number of each matrix in norm ``p`` (None or 2: largest over smallest
    singular value, -2 the reverse; 'fro', 'nuc', inf, -inf, 1, -1: ``norm(A) * norm(A^-1)``,
    inf for a singular matrix), as torch.linalg.cond."""
    if p is None or p in (2, -2):
        check_square("cond", A, square=False)
        s = svdvals(A)
        big, small = s[..., 0], s[..., -1]
        return big / small if p != -2 else small / big
    if p not in ("fro", "nuc", float("inf"), float("-inf"), 1, -1):
        raise ValueError(
            f"linalg.cond: p must be None, 2, -2, 'fro', 'nuc', inf, -inf, 1 or -1, got {p!r}"
        )
    check_square("cond", A)
    ainv, info = inv_ex(A)
    bad = info != 0
    if not bool(bad.any()):
        return matrix_norm(A, p) * matrix_norm(ainv, p)
    safe, _ = _masked(A, info.cpu().reshape(-1).tolist())
    c = matrix_norm(A, p) * matrix_norm(inv(safe), p)
    return where(bad, float("inf"), c)


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """The tensor inverse of A with respect to ``tensordot(., ., ind)``: the inverse of A as a
    ``prod(A.shape[:ind]) x prod(A.shape[ind:])`` matrix, shaped ``A.shape[ind:] +
    A.shape[:ind]``, as torch.linalg.tensorinv."""
    if isinstance(ind, bool) or not isinstance(ind, int) or ind <= 0:
        raise ValueError(f"linalg.tensorinv: ind must be a positive int, got {ind!r}")
    out_shape, in_shape = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    m, n = math.prod(out_shape), math.prod(in_shape)
    if m != n:
        raise ShapeError(
            f"linalg.tensorinv: expected prod(A.shape[:ind]) == prod(A.shape[ind:]), got "
            f"{m} and {n} for shape {tuple(A.shape)} and ind={ind}"
        )
    return inv(A.reshape(m, n)).reshape(in_shape + out_shape)


def tensorsolve(A: Tensor, B: Tensor, dims=None) -> Tensor:
    """X with ``tensordot(A, X, X.ndim) = B``, as torch.linalg.tensorsolve (``dims``: A's dims
    moved to the end first)."""
    if dims is not None:
        nd = A.ndim
        ds = [d % nd for d in dims]
        rest = [d for d in range(nd) if d not in ds]
        A = A.permute(*(rest + ds))
    res_shape = tuple(A.shape[B.ndim :])
    m, n = B.numel(), math.prod(res_shape)
    if tuple(A.shape[: B.ndim]) != tuple(B.shape) or m != n:
        raise ShapeError(
            f"linalg.tensorsolve: A {tuple(A.shape)} must start with B's shape {tuple(B.shape)} "
            "and the rest must hold as many elements"
        )
    return solve(A.reshape(m, n), B.reshape(m)).reshape(res_shape)


# ----------------------------------------------------------------------------- vander
def _powers(x: Tensor, n: int) -> Tensor:
    """[..., n]: x**0 .. x**(n-1) as cumulative products (exact gradients where x is 0)."""
    if not x.dtype.is_floating_point and x.dtype is not D.int64:
        x = x.to(D.int64)
    if n == 0:
        return x.unsqueeze(-1)[..., :0]
    ones = x.new_ones(tuple(x.shape) + (1,))
    if n == 1:
        return ones
    reps = x.unsqueeze(-1).expand(tuple(x.shape) + (n - 1,))
    return cumprod(cat([ones, reps], -1), -1)


@public("vander", method=False)
def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803
    """The Vandermonde matrix of the 1-D ``x``: columns ``x**(N-1) .. x**0`` (the reverse with
    increasing), N = len(x) by default, as torch.vander (integer and bool inputs give int64)."""
    if x.ndim != 1:
        raise ShapeError(
            f"vander(): x must be a one-dimensional tensor, got shape {tuple(x.shape)}"
        )
    n = x.shape[0] if N is None else N
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"vander(): N must be non-negative, got {N!r}")
    v = _powers(x, int(n))
    return v if increasing else v.flip(-1)


def linalg_vander(x: Tensor, *, N: int | None = None) -> Tensor:  # noqa: N803
    """The Vandermonde matrices of x [..., n]: ``x**0 .. x**(N-1)`` along a new last dim (N = n
    by default), as torch.linalg.vander."""
    if x.ndim < 1:
        raise ShapeError("linalg.vander: x must have at least one dimension")
    n = x.shape[-1] if N is None else N
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 1:
        raise ValueError(f"linalg.vander: N must be greater than 1, got {N!r}")
    return _powers(x, int(n))


@public("chain_matmul", method=False)
def chain_matmul(*matrices: Tensor) -> Tensor:
    """The product of the 2-D ``matrices`` in the cheapest order, as torch.chain_matmul
    (linalg.multi_dot's, which PyTorch recommends instead)."""
    if len(matrices) == 0:
        raise ValueError("chain_matmul(): expected one or more matrices")
    for i, m in enumerate(matrices):
        if m.ndim != 2:
            raise ShapeError(f"chain_matmul(): tensor {i} must be 2-D, got shape {tuple(m.shape)}")
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(list(matrices))


# ----------------------------------------------------------------------------- lstsq
Lstsq = namedtuple("lstsq", ["solution", "residuals", "rank", "singular_values"])
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None):
    """(solution, residuals, rank, singular_values) of ``min ||A X - B||`` for A [*, m, n] and
    B [*, m, k] (or [*, m]), batch dims broadcast, as torch.linalg.lstsq on the CPU: the
    minimum-norm solution with singular values at or below ``rcond * s_max`` (rcond: the
    dtype's epsilon times max(m, n)) taken as 0, through pinv, so differentiable; residuals
    ``||A X - B||^2`` per column when m > n and the driver is not 'gelsy' (the default) and A
    has full rank (always with 'gels'); rank except with 'gels'; the singular values with
    'gelsd' / 'gelss'; empty tensors where PyTorch gives them."""
    check_square("lstsq", A, square=False)
    driver = "gelsy" if driver is None else driver
    if driver not in _DRIVERS:
        raise ValueError(f"linalg.lstsq: driver must be one of {_DRIVERS}, got {driver!r}")
    if B.dtype is not A.dtype:
        raise DTypeError(f"linalg.lstsq: A ({A.dtype}) and B ({B.dtype}) must have one dtype")
    vector = B.ndim == A.ndim - 1
    b = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2], A.shape[-1]
    if b.ndim < 2 or b.shape[-2] != m:
        raise ShapeError(
            f"linalg.lstsq: A {tuple(A.shape)} and B {tuple(B.shape)} do not fit (B needs {m} "
            "rows: [*, m, k] or [*, m])"
        )
    if rcond is None:
        rcond = float(np.finfo(A.dtype.np).eps) * max(m, n)
    s = svdvals(A.detach())
    rank = (s > rcond * s[..., :1]).sum(-1) if s.shape[-1] else s.new_zeros(s.shape[:-1]).long()
    x = pinv(A, rtol=rcond) @ b
    empty = A.new_empty(0)
    full = bool((rank == min(m, n)).all()) if rank.numel() else True
    if m > n and driver != "gelsy" and (driver == "gels" or full):
        residuals = ((A @ x - b) ** 2).sum(-2)  # [*, 1] for a vector B too, as PyTorch
    else:
        residuals = empty
    rank_out = rank.new_empty(0) if driver == "gels" else rank
    svals = s if driver in ("gelsd", "gelss") else empty
    return Lstsq(x.squeeze(-1) if vector else x, residuals, rank_out, svals)
