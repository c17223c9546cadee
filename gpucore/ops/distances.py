"""Distances as compositions: cdist (batched pairwise p-norm distances; p = 2 through matmul
for large inputs, as PyTorch), dist (the p-norm of a difference) and pdist (the upper triangle
of cdist of a set with itself). Gradients are 0 at zero distance (as PyTorch's), not 0/0.

kernels: none (the composed ops').
"""

from __future__ import annotations

import math

from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import broadcast_shapes
from .elementwise import where
from .matrix import vector_norm
from .rearrange import triu_indices
from .reduce import _safe_root


def _pnorm_last(diff: Tensor, p: float) -> Tensor:
    """The p-norm over the last dim (p >= 0), 0-safe gradients."""
    if p == 0:
        return where(diff != 0, 1.0, diff * 0).sum(-1)
    if p == math.inf:
        return diff.abs().amax(-1) if diff.shape[-1] else diff.abs().sum(-1)
    if p == 2:
        return _safe_root((diff * diff).sum(-1), 0.5)
    if p == 1:
        return diff.abs().sum(-1)
    mag = diff.abs()
    if p < 1:  # |d|^p has an infinite slope at 0; PyTorch's gradient there is 0, not inf * 0
        nz = mag > 0
        return _safe_root(where(nz, where(nz, mag, 1.0) ** p, 0.0).sum(-1), 1.0 / p)
    return _safe_root((mag**p).sum(-1), 1.0 / p)


def _check_p(op: str, p) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or p < 0:
        raise ValueError(f"{op}(): p must be a non-negative number, got {p!r}")
    return float(p)


@public("cdist", method=False)
def cdist(
    x1: Tensor,
    x2: Tensor,
    p: float = 2.0,
    compute_mode: str = "use_mm_for_euclid_dist_if_necessary",
) -> Tensor:
    """The p-norm distance between each row of x1 [..., P, M] and each row of x2 [..., R, M]:
    [..., P, R], batch dims broadcast, as torch.cdist (p = 2 uses the matrix product when P or R
    exceeds 25, or always with compute_mode='use_mm_for_euclid_dist')."""
    p = _check_p("cdist", p)
    if x1.ndim < 2 or x2.ndim < 2:
        raise ShapeError(f"cdist(): x1 and x2 must have at least 2 dims, got {x1.ndim}, {x2.ndim}")
    if x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(
            f"cdist(): x1 and x2 must have the same number of columns, got {x1.shape[-1]} and "
            f"{x2.shape[-1]}"
        )
    if not x1.dtype.is_floating_point or x1.dtype is not x2.dtype:
        raise DTypeError(
            f"cdist(): expected float tensors of one dtype, got {x1.dtype}, {x2.dtype}"
        )
    modes = (
        "use_mm_for_euclid_dist_if_necessary",
        "use_mm_for_euclid_dist",
        "donot_use_mm_for_euclid_dist",
    )
    if compute_mode not in modes:
        raise ValueError(f"cdist(): compute_mode must be one of {modes}, got {compute_mode!r}")
    batch = broadcast_shapes("cdist", x1.shape[:-2], x2.shape[:-2])
    a = x1.expand(batch + tuple(x1.shape[-2:]))
    b = x2.expand(batch + tuple(x2.shape[-2:]))
    big = a.shape[-2] > 25 or b.shape[-2] > 25
    mm = compute_mode == "use_mm_for_euclid_dist" or (compute_mode == modes[0] and big)
    if p == 2 and mm:
        sq = (a * a).sum(-1).unsqueeze(-1) + (b * b).sum(-1).unsqueeze(-2)
        d2 = (sq - 2 * (a @ b.transpose(-2, -1))).clamp(min=0.0)
        return _safe_root(d2, 0.5)
    return _pnorm_last(a.unsqueeze(-2) - b.unsqueeze(-3), p)


@public("dist")
def dist(input: Tensor, other: Tensor, p: float = 2.0) -> Tensor:
    """The p-norm of ``input - other`` (broadcast), as torch.dist."""
    p = _check_p("dist", p)
    return vector_norm(input - other, p)


@public("pdist", method=False)
def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The distances between the rows of an [N, M] input, i < j in row-major order (the upper
    triangle of cdist(input, input)): N (N - 1) / 2 values, as torch.pdist."""
    p = _check_p("pdist", p)
    if input.ndim != 2:
        raise ShapeError(f"pdist(): expected a 2-D input, got {input.ndim}-D")
    if not input.dtype.is_floating_point:
        raise DTypeError(
            f"pdist(): only supports floating-point dtypes, got {input.dtype}; pass input.float()"
        )
    n = input.shape[0]
    if n < 2:
        return input.new_zeros(0)
    i, j = triu_indices(n, n, 1)
    return _pnorm_last(input[i] - input[j], p)
