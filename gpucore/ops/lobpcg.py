"""torch.lobpcg: the k largest (or smallest) eigenpairs of a symmetric positive definite
generalized problem ``A X = B X diag(E)`` by the locally optimal block preconditioned conjugate
gradient method (Knyazev 2001), as PyTorch's: a random start from gpucore's random stream (or
X), the basis [X, W, P] (Ritz vectors, preconditioned residuals iK R, the previous update)
B-orthonormalized, Rayleigh-Ritz on it, PyTorch's backward-stable convergence test (residual
norm over ``||X|| (||A|| + |E| ||B||)`` below tol). Batches run one matrix at a time.

The iterations run in float64 numpy on the host (no gradient flows through iterations). The
result is then re-expressed in gpucore ops so that autograd gives the exact first-order
derivative of the converged eigenpairs with respect to A (B None, as PyTorch): E = diag(X^T A X)
and X plus a term that is zero in value and whose derivative is the eigenvector perturbation
(the returned block's mutual terms over eigenvalue gaps, and the reduced resolvent of A on the
complement of the block).

kernels: none (numpy for the iterations; the composed ops' for the result).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..autograd.grad_mode import _state as _grad_state
from ..creation import tensor as _tensor
from ..errors import DTypeError, LinAlgError, ShapeError
from ..tensor import Tensor
from .api import public
from .joining import stack
from .random import randn

_MAX_ITER = 10_000  # the cap on niter=-1 (until convergence) so that no call loops forever


def _b_orthonormal(v: np.ndarray, bmul) -> np.ndarray:
    """The columns of v B-orthonormalized (through the eigenvectors of their Gram matrix, after
    scaling each to unit norm); directions numerically dependent on the others are dropped."""
    norms = np.linalg.norm(v, axis=0)
    v = v[:, norms > 0] / norms[norms > 0]
    if v.shape[1] == 0:
        return v
    g = v.T @ bmul(v)
    w, u = np.linalg.eigh((g + g.T) * 0.5)
    keep = w > max(w[-1], 0.0) * 1e-12
    return v @ (u[:, keep] / np.sqrt(w[keep]))


def _orthogonalize(v: np.ndarray, x: np.ndarray, bmul) -> np.ndarray:
    """v with its B-components along the B-orthonormal x removed (twice, for accuracy)."""
    for _ in range(2):
        v = v - x @ (bmul(x).T @ v)
    return v


def _ritz(s: np.ndarray, a: np.ndarray, n: int, largest: bool) -> tuple:
    """The n extreme Ritz pairs (values descending when largest, else ascending) on span(s)."""
    h = s.T @ a @ s
    w, c = np.linalg.eigh((h + h.T) * 0.5)
    idx = np.argsort(-w if largest else w, kind="stable")[:n]
    return w[idx], s @ c[:, idx]


def _solve_one(a, b, x, ik, k, niter, tol, largest) -> tuple:
    """(E [k], X [m, k]) of one LOBPCG run in float64."""
    bmul = (lambda v: v) if b is None else (lambda v: b @ v)
    n = x.shape[1]
    x_norm = np.linalg.norm(x)
    a_norm = np.linalg.norm(a @ x) / x_norm
    b_norm = np.linalg.norm(bmul(x)) / x_norm
    e, x = _ritz(_b_orthonormal(x, bmul), a, n, largest)
    p = None
    it = 0
    cap = niter if niter >= 0 else max(_MAX_ITER, 10 * a.shape[0])  # -1 never loops forever
    while True:
        r = a @ x - bmul(x) * e
        rnorm = np.linalg.norm(r, axis=0)
        denom = np.linalg.norm(x, axis=0) * (a_norm + np.abs(e) * b_norm)
        with np.errstate(divide="ignore", invalid="ignore"):
            rerr = np.where(rnorm == 0, 0.0, rnorm / denom)  # a zero residual has converged
        if not np.isfinite(rerr).all():
            raise LinAlgError(
                f"lobpcg(): the residuals became non-finite after {it} iterations (is A or B "
                "singular or ill-conditioned?)"
            )
        done = rerr < tol
        count = int(np.argmin(done)) if not done.all() else n  # converged in order, as PyTorch
        if count >= k or it == niter:
            break
        if it >= cap:
            raise LinAlgError(
                f"lobpcg(): niter=-1 but {k} eigenpairs did not converge to tol={tol:g} in "
                f"{cap} iterations; pass a finite niter or a larger tol"
            )
        w = r[:, ~done] if ik is None else ik @ r[:, ~done]
        block = w if p is None else np.concatenate([w, p], axis=1)
        block = _b_orthonormal(_orthogonalize(block, x, bmul), bmul)
        block = _b_orthonormal(_orthogonalize(block, x, bmul), bmul)  # re-orthogonalized
        s = np.concatenate([x, block], axis=1)
        e_new, x_new = _ritz(s, a, n, largest)
        p = _orthogonalize(x_new, x, bmul)  # the step, without its part along the old X
        e, x = e_new, x_new
        it += 1
    return e[:k], x[:, :k]


def _differentiable(A: Tensor, E: np.ndarray, X: np.ndarray) -> tuple:
    """(E, X) as gpucore tensors whose derivative with respect to A is the eigenpairs'; values
    unchanged. A enters through its symmetric part (A + A^T) / 2, the matrix the eigenpairs
    belong to, so the gradient is symmetric, as PyTorch's lobpcg and linalg.eigh give."""
    dt = A.dtype
    a0 = A.detach()
    x0 = _tensor(X, dtype=dt, device=A.device)
    a_sym = (A + A.transpose(0, 1)) * 0.5
    diff = a_sym - a_sym.detach()  # zero, carrying A's gradient
    dx = diff @ x0  # [m, k]: dA x_i
    e_out = (x0 * (a_sym @ x0)).sum(0)
    # within the block: x_j (x_j^T dA x_i) / (E_i - E_j), j != i
    gap = E[None, :] - E[:, None]
    with np.errstate(divide="ignore"):
        inv_gap = np.where(np.eye(len(E), dtype=bool), 0.0, 1.0 / np.where(gap == 0, 1, gap))
    inner = x0 @ ((x0.transpose(0, 1) @ dx) * _tensor(inv_gap, dtype=dt, device=A.device))
    # outside it: -(A - E_i)^+ (I - X X^T) dA x_i on the complement of the block
    a_np = np.asarray(a0.cpu().numpy(), np.float64)
    m = a_np.shape[0]
    proj = np.eye(m) - X @ X.T
    res = np.stack(
        [np.linalg.solve(proj @ (a_np - ei * np.eye(m)) @ proj + X @ X.T, proj) for ei in E]
    )
    resolvent = _tensor(res, dtype=dt, device=A.device)  # [k, m, m]
    outer = (resolvent @ dx.transpose(0, 1).unsqueeze(-1)).squeeze(-1).transpose(0, 1)
    return e_out, x0 + inner - outer


@public("lobpcg", method=False)
def lobpcg(
    A: Tensor,
    k: int | None = None,
    B: Tensor | None = None,
    X: Tensor | None = None,
    n: int | None = None,
    iK: Tensor | None = None,  # noqa: N803 - PyTorch's name
    niter: int | None = None,
    tol: float | None = None,
    largest: bool | None = None,
    method: str | None = None,
    tracker=None,
    ortho_iparams: dict | None = None,
    ortho_fparams: dict | None = None,
    ortho_bparams: dict | None = None,
) -> tuple:
    """(E [*, k], X [*, m, k]): the k largest eigenvalues (smallest with largest=False) and
    B-orthonormal eigenvectors of the symmetric A [*, m, m] (B symmetric positive definite, the
    identity when None), as torch.lobpcg: X (or n random columns from gpucore's stream, n = k by
    default; 3 n <= m) starts the iteration, iK preconditions the residuals, niter caps the
    iterations (1000; -1 until convergence), tol defaults to the square root of the dtype's
    epsilon. method 'basic' and 'ortho' both run the B-orthonormalized basis (the ortho_*
    parameters tune PyTorch's own orthogonalization and are accepted); tracker is not supported.
    Gradients with respect to A when B is None, as PyTorch."""
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"lobpcg(): A must be square, got shape {tuple(A.shape)}")
    if not A.dtype.is_floating_point:
        raise DTypeError(f"lobpcg(): A must be a floating point tensor, got {A.dtype}")
    if B is not None and tuple(B.shape) != tuple(A.shape):
        raise ShapeError(
            f"lobpcg(): A and B must have same shape, got {tuple(A.shape)} vs {tuple(B.shape)}"
        )
    if method not in (None, "basic", "ortho"):
        raise ValueError(f"lobpcg(): method must be 'basic' or 'ortho', got {method!r}")
    if tracker is not None:
        raise NotImplementedError("lobpcg(): tracker is not supported by gpucore")
    dt = A.dtype if A.dtype in (D.float32, D.float64) else D.float32
    if tol is None:
        tol = math.sqrt({D.float32: 1.2e-07, D.float64: 2.23e-16}[dt])
    m = A.shape[-1]
    k = (1 if X is None else X.shape[-1]) if k is None else int(k)
    n = (k if n is None else int(n)) if X is None else X.shape[-1]
    if m < 3 * n:
        raise ValueError(
            f"lobpcg(): LOBPCG algorithm is not applicable when the number of A rows (={m}) is "
            f"smaller than 3 x the number of requested eigenpairs (={n})"
        )
    if not 0 < k <= n:
        raise ValueError(f"lobpcg(): k (={k}) must be in [1, n (={n})]")
    grads = _grad_state.enabled and (A._requires_grad or (B is not None and B._requires_grad))
    if grads and B is not None:
        raise ValueError("lobpcg(): gradients are not supported with B (as PyTorch's backward)")
    niter = 1000 if niter is None else int(niter)
    largest = True if largest is None else bool(largest)

    def host(t):
        return None if t is None else np.asarray(t.detach().cpu().numpy(), np.float64)

    batch = tuple(A.shape[:-2])
    a_all = host(A).reshape((-1, m, m))
    b_all = None if B is None else host(B).reshape((-1, m, m))
    if X is not None and tuple(X.shape[-2:]) != (m, n):
        raise ShapeError(f"lobpcg(): X shape mismatch: got {tuple(X.shape)}, expected {(m, n)}")
    x_all = None if X is None else np.broadcast_to(host(X), batch + (m, n)).reshape((-1, m, n))
    ik = host(iK)
    for name, arr in (("A", a_all), ("B", b_all), ("X", x_all), ("iK", ik)):
        if arr is not None and not np.isfinite(arr).all():
            raise LinAlgError(f"lobpcg(): {name} contains non-finite values (NaN or inf)")
    es, xs = [], []
    for i in range(a_all.shape[0]):
        x0 = x_all[i] if x_all is not None else host(randn(m, n, dtype=dt))
        b = None if b_all is None else b_all[i]
        e, x = _solve_one(a_all[i], b, x0, ik, k, niter, tol, largest)
        es.append(e)
        xs.append(x)
    if grads:
        a2 = A.reshape((-1, m, m))
        outs = [_differentiable(a2[i].to(dt), es[i], xs[i]) for i in range(len(es))]
        e_t = stack([o[0] for o in outs])
        x_t = stack([o[1] for o in outs])
        return e_t.reshape(batch + (k,)), x_t.reshape(batch + (m, k))
    e_t = _tensor(np.stack(es).reshape(batch + (k,)), dtype=dt, device=A.device)
    x_t = _tensor(np.stack(xs).reshape(batch + (m, k)), dtype=dt, device=A.device)
    return e_t, x_t
