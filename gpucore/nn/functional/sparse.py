"""Sparse: embedding (rows of a weight picked by integer indices, with padding_idx and max_norm)
and one_hot."""

from __future__ import annotations

from ... import dtypes as D
from ...autograd.grad_mode import no_grad
from ...errors import DTypeError, GpucoreIndexError, ShapeError
from ...ops import elementwise as E
from ...ops.common import check_indices
from ...ops.indexing import index_select
from ...ops.indexing import one_hot as _one_hot
from ...tensor import Tensor
from ._utils import _check_tensor


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of weight [num_embeddings, dim] picked by the integer indices in input.

    padding_idx: that row's gradient is always zero. max_norm: rows looked up are first
    renormalized in place to at most that norm (as PyTorch).
    """
    if not isinstance(input, Tensor) or input.dtype not in (D.int64, D.int32):
        raise DTypeError(
            "embedding(): input must be an int64 (or int32) tensor of indices"
            + (f", got {input.dtype}" if isinstance(input, Tensor) else "")
        )
    _check_tensor("embedding", weight, "weight")
    if weight.ndim != 2:
        raise ShapeError(
            f"embedding(): weight must be 2-D [num_embeddings, embedding_dim], got "
            f"{tuple(weight.shape)}"
        )
    if scale_grad_by_freq or sparse:
        raise NotImplementedError(
            "embedding(): scale_grad_by_freq and sparse gradients are not supported"
        )
    num = weight.shape[0]
    check_indices("embedding", input, num, "the embedding table (dim 0)")
    if input.dtype is not D.int64:
        input = input.to(D.int64)
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise GpucoreIndexError(
                f"embedding(): padding_idx {padding_idx} is out of range for {num} embeddings"
            )
        padding_idx = padding_idx % num
    if max_norm is not None:
        with no_grad():
            idx = input.reshape(-1)
            rows = weight[idx]
            norms = rows.norm(norm_type, dim=1, keepdim=True)
            scale = E.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
            weight[idx] = rows * scale
    # index_select rather than weight[input]: the same rows and gradient, and it captures into
    # a compiled model with the indices as a runtime input (an index key cannot be captured)
    out = index_select(weight, 0, input.reshape(-1)).reshape(
        tuple(input.shape) + (weight.shape[1],)
    )
    if padding_idx is not None and out.requires_grad:
        pad = (input == padding_idx).unsqueeze(-1)
        out = E.where(pad, out.detach(), out)
    return out


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding of class indices, with a trailing class dim."""
    return _one_hot(tensor, num_classes)
