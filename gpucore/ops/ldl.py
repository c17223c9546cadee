"""The LDL^T factorization of real symmetric matrices as PyTorch's linalg.ldl_factor,
ldl_factor_ex and ldl_solve: Bunch-Kaufman pivoting (LAPACK's sytrf, lower triangle), the compact
LD (L's unit lower triangle below the diagonal, D's 1x1 and 2x2 blocks on and next to it, zeros
above) and LAPACK's 1-based int32 pivots (negative pairs for the 2x2 blocks). Not
differentiable, as in PyTorch. Batches of matrices; ldl_solve broadcasts the batch dims of its
operands. Tensors on the Vulkan device go through host memory.

kernels: backends/cpu/kernels/ldl.py (numpy) · none on Vulkan.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes as D
from ..errors import DTypeError, LinAlgError, ShapeError
from ..tensor import Tensor
from .common import broadcast_shapes
from .decompositions import check_square
from .registry import apply, defop
from .samples import Sample, uniform

LDLFactor = namedtuple("ldl_factor", ["LD", "pivots"])
LDLFactorEx = namedtuple("ldl_factor_ex", ["LD", "pivots", "info"])


def _symmetric(*shape, seed=0):
    """Random symmetric matrices whose zero-ish diagonal forces 2x2 pivots now and then."""
    a = uniform(*shape, low=-1.0, high=1.0, seed=seed)
    return (a + np.swapaxes(a, -1, -2)) * 0.5 - np.eye(shape[-1]) * 0.9 * np.diagonal(
        a, axis1=-2, axis2=-1
    )[..., None]


def _reconstruct(ld: np.ndarray, piv: np.ndarray) -> np.ndarray:
    """P L D L^T P^T from one compact factorization (the inverse of LAPACK's sytrf lower)."""
    n = ld.shape[0]
    lo = np.eye(n)
    d = np.zeros((n, n))
    k = 0
    steps = []
    while k < n:
        if piv[k] > 0:
            d[k, k] = ld[k, k]
            lo[k + 1 :, k] = ld[k + 1 :, k]
            steps.append((k, piv[k] - 1, 1))
            k += 1
        else:
            d[k : k + 2, k : k + 2] = [[ld[k, k], ld[k + 1, k]], [ld[k + 1, k], ld[k + 1, k + 1]]]
            lo[k + 2 :, k : k + 2] = ld[k + 2 :, k : k + 2]
            steps.append((k + 1, -piv[k] - 1, 2))
            k += 2
    # A = P_1 L_1 ... : apply the block eliminations from the last back to the first
    a = d
    for k, kp, step in reversed(steps):
        s = k - step + 1
        m = np.eye(n)
        m[s + step :, s : s + step] = lo[s + step :, s : s + step]
        a = m @ a @ m.T
        p = np.arange(n)
        p[[k, kp]] = p[[kp, k]]
        a = a[p][:, p]
    return a


def _factor_call(op, a):
    ld, piv, _info = apply(op, a)
    m = ld.numpy().reshape((-1,) + tuple(ld.shape[-2:]))
    p = piv.numpy().reshape(-1, ld.shape[-1])
    return np.stack([_reconstruct(x, y) for x, y in zip(m, p)]).reshape(tuple(a.shape))


LDL_FACTOR = defop(
    "linalg_ldl_factor",
    infer=lambda a: [(a.shape, a.dtype), (a.shape[:-1], D.int32), (a.shape[:-2], D.int32)],
    samples=lambda: [
        # checked through the reconstruction P L D L^T P^T, which must give A back
        Sample(_symmetric(4, 4, seed=1), ref=lambda a: a, call=_factor_call, grad=False),
        Sample(_symmetric(2, 5, 5, seed=2), ref=lambda a: a, call=_factor_call, grad=False),
    ],
)


def _solve_call(op, a, b):
    ld, piv, _info = apply(LDL_FACTOR, a)
    return apply(op, ld, piv, b)


LDL_SOLVE = defop(
    "linalg_ldl_solve",
    infer=lambda ld, piv, b: (b.shape, ld.dtype),
    samples=lambda: [
        Sample(
            _symmetric(4, 4, seed=3) + 2 * np.eye(4),
            uniform(4, 2, seed=4),
            ref=np.linalg.solve,
            call=_solve_call,
            grad=False,
        ),  # fmt: skip
        Sample(
            _symmetric(3, 5, 5, seed=5),
            uniform(3, 5, 1, seed=6),
            ref=np.linalg.solve,
            call=_solve_call,
            grad=False,
        ),  # fmt: skip
    ],
)


def _check_hermitian(op: str, hermitian) -> None:
    if not isinstance(hermitian, bool):
        raise TypeError(f"linalg.{op}: hermitian must be a bool, got {type(hermitian).__name__}")


def ldl_factor_ex(A: Tensor, *, hermitian: bool = False, check_errors: bool = False) -> tuple:
    """(LD, pivots, info) of the Bunch-Kaufman LDL^T factorization of the symmetric matrices A
    [*, n, n] (only their lower triangle is read), as torch.linalg.ldl_factor_ex: info[...] is
    0, or the 1-based index of the first zero diagonal block of D (then a solve would divide by
    zero); check_errors=True raises LinAlgError instead. hermitian is the same for real
    matrices."""
    _check_hermitian("ldl_factor_ex", hermitian)
    check_square("ldl_factor_ex", A)
    ld, pivots, info = apply(LDL_FACTOR, A)
    if check_errors:
        _raise_on(info, "ldl_factor_ex")
    return LDLFactorEx(ld, pivots, info)


def _raise_on(info: Tensor, op: str) -> None:
    codes = info.numpy().reshape(-1)
    bad = np.flatnonzero(codes)
    if bad.size:
        where = f" (batch element {int(bad[0])})" if info.ndim else ""
        raise LinAlgError(
            f"linalg.{op}: the factorization could not be completed because the input is not "
            f"invertible: D's diagonal element {int(codes[bad[0]])} is zero{where}"
        )


def ldl_factor(A: Tensor, *, hermitian: bool = False) -> tuple:
    """(LD, pivots) of the Bunch-Kaufman LDL^T factorization of the symmetric matrices A
    [*, n, n] (lower triangle read), as torch.linalg.ldl_factor; a singular D raises
    LinAlgError (ldl_factor_ex reports it in info instead)."""
    _check_hermitian("ldl_factor", hermitian)
    check_square("ldl_factor", A)
    ld, pivots, info = apply(LDL_FACTOR, A)
    _raise_on(info, "ldl_factor")
    return LDLFactor(ld, pivots)


def ldl_solve(LD: Tensor, pivots: Tensor, B: Tensor, *, hermitian: bool = False) -> Tensor:  # noqa: N803
    """X with ``A X = B`` from linalg.ldl_factor's (LD, pivots) of A, as torch.linalg.ldl_solve:
    LD [*, n, n], pivots [*, n] (int32), B [*, n, k], batch dims broadcast."""
    _check_hermitian("ldl_solve", hermitian)
    check_square("ldl_solve", LD)
    if pivots.dtype is not D.int32:
        raise DTypeError(f"linalg.ldl_solve: pivots must be int32, got {pivots.dtype}")
    if B.dtype is not LD.dtype:
        raise DTypeError(f"linalg.ldl_solve: LD ({LD.dtype}) and B ({B.dtype}) must have one dtype")
    n = LD.shape[-1]
    if pivots.ndim < 1 or pivots.shape[-1] != n or B.ndim < 2 or B.shape[-2] != n:
        raise ShapeError(
            f"linalg.ldl_solve: LD {tuple(LD.shape)}, pivots {tuple(pivots.shape)} and B "
            f"{tuple(B.shape)} do not fit (pivots [*, n], B [*, n, k] for LD [*, n, n])"
        )
    batch = broadcast_shapes(
        "linalg.ldl_solve", tuple(LD.shape[:-2]), tuple(pivots.shape[:-1]), tuple(B.shape[:-2])
    )
    p = pivots.numpy()
    if p.size and (np.any(p == 0) or np.any(np.abs(p) > n)):
        raise ValueError(
            f"linalg.ldl_solve: pivots must be LAPACK's 1-based indices in [-{n}, {n}] without 0"
        )
    ld = LD.expand(batch + (n, n)).contiguous()
    pv = pivots.expand(batch + (n,)).contiguous()
    b = B.expand(batch + tuple(B.shape[-2:])).contiguous()
    return apply(LDL_SOLVE, ld, pv, b)
