"""Distances: cosine_similarity and pairwise_distance (broadcasting their two inputs), and pdist
(gpucore.pdist: the upper triangle of the distances between the rows of one input)."""

from __future__ import annotations

from ...ops.common import broadcast_shapes
from ...ops.distances import pdist as _pdist
from ...tensor import Tensor
from ._utils import _check_tensor


def _broadcast(op: str, *ts: Tensor) -> tuple:
    shape = broadcast_shapes(op, *[t.shape for t in ts])
    return tuple(t if tuple(t.shape) == shape else t.expand(shape) for t in ts)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of the angle between x1 and x2 along dim (broadcast): each is divided by its
    norm, clamped below at eps, before the dot product (PyTorch's stable form)."""
    _check_tensor("cosine_similarity", x1, "x1")
    _check_tensor("cosine_similarity", x2, "x2")
    x1, x2 = _broadcast("cosine_similarity", x1, x2)
    n1 = x1.norm(2, dim, keepdim=True).clamp(min=eps)
    n2 = x2.norm(2, dim, keepdim=True).clamp(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """||x1 - x2 + eps||_p over the last dim (broadcast)."""
    _check_tensor("pairwise_distance", x1, "x1")
    _check_tensor("pairwise_distance", x2, "x2")
    broadcast_shapes("pairwise_distance", x1.shape, x2.shape)
    d = x1 - x2 + eps
    if d.ndim == 0:
        d = d.reshape(1)
        return d.norm(p, 0, keepdim=False)
    return d.norm(p, -1, keepdim=keepdim)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """torch.nn.functional.pdist: the p-norm distances between the rows of an [N, M] input, i < j
    in row-major order (N (N - 1) / 2 values; a zero distance has gradient 0)."""
    return _pdist(input, p)
