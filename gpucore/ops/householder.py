"""Householder reflectors: geqrf (the op: LAPACK's QR factorization in its compact form, the
reflectors below the diagonal and R on and above it, plus their scalars tau; not
differentiable, as in PyTorch), and as compositions linalg.householder_product (and its older
name orgqr), the first n columns of ``H_1 H_2 ... H_k`` with ``H_i = I - tau_i v_i v_i^T``
(LAPACK's orgqr), and ormqr, that product applied to a matrix (LAPACK's ormqr). Matrix products
and a triangle, so their gradients with respect to A, tau and the other matrix come from
autograd and they run on every backend.

kernels: backends/cpu/kernels/decompositions.py (geqrf: numpy's LAPACK) · none on Vulkan.
"""

from __future__ import annotations

from collections import namedtuple

from ..creation import eye
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .api import public
from .decompositions import check_square, mT
from .joining import cat
from .rearrange import tril
from .registry import apply, defop
from .samples import Sample, uniform

Geqrf = namedtuple("geqrf", ["a", "tau"])


def _geqrf_call(op, a):
    """Q R rebuilt from geqrf's compact form: it must give A back."""
    h, tau = apply(op, a)
    n = min(a.shape[-2], a.shape[-1])
    q = householder_product(h[..., :n], tau)
    return q @ h[..., :n, :].triu()


GEQRF = defop(
    "linalg_geqrf",
    infer=lambda a: [
        (a.shape, a.dtype),
        (a.shape[:-2] + (min(a.shape[-2], a.shape[-1]),), a.dtype),
    ],  # fmt: skip
    samples=lambda: [
        Sample(uniform(4, 3, seed=1), ref=lambda a: a, call=_geqrf_call, grad=False),
        Sample(uniform(2, 3, 5, seed=2), ref=lambda a: a, call=_geqrf_call, grad=False),
    ],
)


@public("geqrf")
def geqrf(input: Tensor) -> tuple:
    """(a, tau): the QR factorization of input [*, m, n] in LAPACK's geqrf form, R on and above
    the diagonal of a, the Householder vectors below it, their scalars in tau [*, min(m, n)],
    as torch.geqrf (not differentiable, as there; householder_product rebuilds Q)."""
    check_square("geqrf", input, square=False)
    a, tau = apply(GEQRF, input)
    return Geqrf(a, tau)


def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first n columns of the product of the k Householder reflectors ``I - tau_i v_i
    v_i^T`` whose vectors v_i sit below the diagonal of A [*, m, n] (an implicit 1 on the
    diagonal, zeros above), tau [*, k], k <= n <= m, as torch.linalg.householder_product."""
    if not A.dtype.is_floating_point or tau.dtype is not A.dtype:
        raise DTypeError(
            f"linalg.householder_product: A and tau must be floating point of one dtype, got "
            f"{A.dtype} and {tau.dtype}"
        )
    if A.ndim < 2 or tau.ndim < 1:
        raise ShapeError(
            f"linalg.householder_product: A must have at least 2 dims and tau at least 1, got "
            f"shapes {tuple(A.shape)} and {tuple(tau.shape)}"
        )
    m, n, k = A.shape[-2], A.shape[-1], tau.shape[-1]
    if not k <= n <= m:
        raise ShapeError(
            f"linalg.householder_product: needs tau.shape[-1] <= A.shape[-1] <= A.shape[-2], "
            f"got A {tuple(A.shape)} and tau {tuple(tau.shape)}"
        )
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise ShapeError(
            f"linalg.householder_product: the batch dims of A {tuple(A.shape)} and tau "
            f"{tuple(tau.shape)} must be equal"
        )
    ident = eye(m, n, dtype=A.dtype, device=A.device)
    x = ident.expand(tuple(A.shape[:-2]) + (m, n))
    if k == 0:
        return x.clone()
    # the reflector vectors as columns: A's strict lower triangle plus the unit diagonal
    v = tril(A[..., :k], -1) + ident[:, :k]
    for i in range(k - 1, -1, -1):  # X <- H_i X, from the last reflector back
        vi = v[..., i : i + 1]
        x = x - (tau[..., i : i + 1].unsqueeze(-1) * vi) @ (vi.transpose(-2, -1) @ x)
    return x


@public("orgqr")
def orgqr(input: Tensor, input2: Tensor) -> Tensor:
    """torch.orgqr / Tensor.orgqr: linalg.householder_product(input, input2)."""
    return householder_product(input, input2)


@public("ormqr")
def ormqr(
    input: Tensor, input2: Tensor, input3: Tensor, left: bool = True, transpose: bool = False
) -> Tensor:
    """``Q @ input3`` (``input3 @ Q`` with left=False; Q^T with transpose=True) for the square Q
    of the reflectors in input [*, mn, k] and tau = input2 (as from geqrf), mn the rows
    (left) or columns of input3, as torch.ormqr (a composition over householder_product, so
    differentiable)."""
    if input3.ndim < 2:
        raise ShapeError(f"ormqr(): other must be a matrix, got shape {tuple(input3.shape)}")
    mn = input3.shape[-2] if left else input3.shape[-1]
    if input.ndim < 2 or input.shape[-2] != mn or input2.shape[-1] > min(mn, input.shape[-1]):
        raise ShapeError(
            f"ormqr(): input {tuple(input.shape)}, tau {tuple(input2.shape)} and other "
            f"{tuple(input3.shape)} do not fit (input [*, {mn}, k], tau [*, <= min({mn}, k)])"
        )
    k = input.shape[-1]
    a = (
        input[..., :mn]
        if k >= mn
        else cat([input, input.new_zeros(input.shape[:-1] + (mn - k,))], -1)
    )
    q = householder_product(a, input2)
    if transpose:
        q = mT(q)
    return q @ input3 if left else input3 @ q
