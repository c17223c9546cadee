"""Helpers shared by the distributions (torch.distributions.utils' public names)."""

from __future__ import annotations

import gpucore as gc

from ..tensor import Tensor

__all__ = [
    "broadcast_all",
    "clamp_probs",
    "logits_to_probs",
    "probs_to_logits",
    "tril_matrix_to_vec",
    "vec_to_tril_matrix",
]


def broadcast_all(*values):
    """Numbers and tensors as tensors of one broadcast shape (numbers take the tensors' dtype)."""
    like = next((v for v in values if isinstance(v, Tensor)), None)
    dtype = like.dtype if like is not None else gc.get_default_dtype()
    device = like.device if like is not None else None
    ts = [
        v if isinstance(v, Tensor) else gc.as_tensor(v, dtype=dtype, device=device) for v in values
    ]
    return gc.broadcast_tensors(*ts)


def clamp_probs(probs: Tensor) -> Tensor:
    """Probabilities kept one machine epsilon inside (0, 1), so their logs stay finite."""
    eps = gc.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """log-odds of a probability (``is_binary``) or log-probabilities of a categorical."""
    p = clamp_probs(probs)
    return p.log() - (-p).log1p() if is_binary else p.log()


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """The inverse of ``probs_to_logits``: a sigmoid, or a softmax over the last dimension."""
    return logits.sigmoid() if is_binary else logits.softmax(-1)


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The lower triangle (from diagonal ``diag``) of the last two dimensions, row by row."""
    n = mat.shape[-1]
    rows, cols = gc.tril_indices(n, n, offset=diag, device=mat.device)
    return mat[..., rows, cols]


def _tril_count(n: int, diag: int) -> int:
    return sum(max(0, min(n, i + diag + 1)) for i in range(n))


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The inverse of ``tril_matrix_to_vec``: a square matrix with zeros above the triangle."""
    m = vec.shape[-1]
    n = 0
    while _tril_count(n, diag) < m:
        n += 1
    if _tril_count(n, diag) != m:
        raise ValueError(f"vec_to_tril_matrix: {m} values do not fill a triangle")
    rows, cols = gc.tril_indices(n, n, offset=diag, device=vec.device)
    out = gc.zeros(tuple(vec.shape[:-1]) + (n, n), dtype=vec.dtype, device=vec.device)
    out[..., rows, cols] = vec
    return out
