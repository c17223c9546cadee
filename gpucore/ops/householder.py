"""Householder products as a composition: linalg.householder_product (and its older name
orgqr, function and method), the first n columns of ``H_1 H_2 ... H_k`` with
``H_i = I - tau_i v_i v_i^T`` for the reflectors LAPACK's geqrf stores below the diagonal of A
(LAPACK's orgqr). Matrix products and a triangle, so the gradient with respect to both A and tau
comes from autograd and it runs on every backend.

kernels: none (the composed ops').
"""

from __future__ import annotations

from ..creation import eye
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .api import public
from .rearrange import tril


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
