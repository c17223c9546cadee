"""Sparse: embedding (rows of a weight picked by integer indices, with padding_idx and max_norm),
embedding_bag (sums, means or maxima of bags of them) and one_hot."""

from __future__ import annotations

import numpy as np

from ... import dtypes as D
from ...autograd.grad_mode import no_grad
from ...creation import full, zeros
from ...errors import DTypeError, GpucoreIndexError, ShapeError
from ...ops import elementwise as E
from ...ops.common import check_indices
from ...ops.indexing import index_select
from ...ops.indexing import one_hot as _one_hot
from ...ops.inplace import inplace as _inplace
from ...ops.joining import cat
from ...tensor import Tensor
from ._utils import _check_tensor, _const


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
    renormalized in place to at most that norm (as PyTorch). scale_grad_by_freq: each row's
    gradient is divided by the number of times its index occurs in input.
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
    if sparse:
        raise NotImplementedError(
            "embedding(): sparse gradients are not supported (gpucore has no sparse tensors); "
            "use sparse=False"
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
            embedding_renorm_(weight, input, max_norm, norm_type)
    # index_select rather than weight[input]: the same rows and gradient, and it captures into
    # a compiled model with the indices as a runtime input (an index key cannot be captured)
    flat = input.reshape(-1)
    rows = index_select(weight, 0, flat)
    if scale_grad_by_freq and rows._requires_grad:
        rows.register_hook(_by_frequency(flat, weight))
    out = rows.reshape(tuple(input.shape) + (weight.shape[1],))
    if padding_idx is not None and out._requires_grad:
        pad = (input == padding_idx).unsqueeze(-1)
        out = E.where(pad, out.detach(), out)
    return out


def _by_frequency(flat: Tensor, weight: Tensor):
    """The gradient hook of scale_grad_by_freq: each looked-up row's gradient times 1 / (how
    many times its index occurs in the mini-batch), as PyTorch (the forward is unchanged)."""
    idx = flat.numpy()
    counts = np.bincount(idx, minlength=weight.shape[0])[idx]
    scale = _const((1.0 / counts)[:, None], dtype=weight.dtype, device=weight.device)
    return lambda grad: grad * scale


def embedding_renorm_(input: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> Tensor:
    """torch.embedding_renorm_: the rows of input [num_embeddings, dim] named by ``indices``
    whose ``norm_type``-norm exceeds max_norm are scaled in place to norm
    ``max_norm / (norm + 1e-7) * norm``; returns input (an in-place op: a leaf that requires grad
    raises unless under no_grad, as in PyTorch)."""
    _check_tensor("embedding_renorm_", input)
    if input.ndim != 2:
        raise ShapeError(
            f"embedding_renorm_(): input must be 2-D [num_embeddings, dim], got "
            f"{tuple(input.shape)}"
        )
    if not isinstance(indices, Tensor) or indices.dtype not in (D.int64, D.int32):
        raise DTypeError("embedding_renorm_(): indices must be an int64 (or int32) tensor")
    check_indices("embedding_renorm_", indices, input.shape[0], "the embedding table (dim 0)")
    with no_grad():
        idx = indices.reshape(-1).to(D.int64)
        norms = input.detach()[idx].norm(norm_type, dim=1, keepdim=True)
        factor = full((input.shape[0], 1), 1.0, dtype=input.dtype, device=input.device)
        factor[idx] = E.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
    return _inplace(input, lambda w: w * factor, saves_self=False, op="embedding_renorm_")


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding of class indices, with a trailing class dim."""
    return _one_hot(tensor, num_classes)


def _bags(op: str, input: Tensor, offsets, include_last_offset: bool):
    """(flat indices [n], each bag's (start, end) as numpy arrays) for a 2-D input of fixed-size
    bags or a 1-D input cut at offsets."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}(): offsets must be None for a 2-D input")
        b, length = input.shape
        starts = np.arange(b) * length
        return input.reshape(-1), starts, starts + length
    if input.ndim != 1 or offsets is None:
        raise ValueError(
            f"{op}(): input must be 2-D [bags, length], or 1-D with 1-D offsets, got input of "
            f"shape {tuple(input.shape)}" + (" and no offsets" if offsets is None else "")
        )
    off = np.asarray(offsets.numpy() if isinstance(offsets, Tensor) else offsets, np.int64)
    n = input.shape[0]
    if off.ndim != 1 or (off.size and (off[0] != 0 or (np.diff(off) < 0).any() or off[-1] > n)):
        raise ValueError(
            f"{op}(): offsets must be 1-D, start at 0, be non-decreasing and at most the input's "
            f"length ({n}), got {off.tolist()}"
        )
    if include_last_offset:
        return input, off[:-1], off[1:]
    return input, off, np.append(off[1:], n)


def embedding_bag(
    input: Tensor,
    weight: Tensor,
    offsets: Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    """Sums, means or maxima of bags of embeddings (torch.nn.functional.embedding_bag): a 2-D
    input is one bag per row; a 1-D input is cut into bags at offsets. Entries equal to
    padding_idx are left out of their bag; an empty bag gives zeros. per_sample_weights scale
    each looked-up row (mode 'sum' only). Lowered to embedding and index_add into the bags
    (sum, mean) or a gather padded with -inf and a max (max).

    scale_grad_by_freq divides each row's gradient by the number of times its index occurs in
    the whole input, as documented; PyTorch 2.13's CPU kernel gets other factors when indices
    repeat unequal numbers of times (pytorch#190063), so such inputs train differently there."""
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag(): mode must be 'sum', 'mean' or 'max', got {mode!r}")
    if scale_grad_by_freq and mode == "max":
        raise ValueError(
            "embedding_bag(): max mode does not support scaling the gradient by the frequency"
        )
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            f"embedding_bag(): per_sample_weights is only supported for mode='sum', got "
            f"mode={mode!r}"
        )
    flat, starts, ends = _bags("embedding_bag", input, offsets, include_last_offset)
    if per_sample_weights is not None and tuple(per_sample_weights.shape) != tuple(input.shape):
        raise ShapeError(
            f"embedding_bag(): per_sample_weights must have the input's shape "
            f"{tuple(input.shape)}, got {tuple(per_sample_weights.shape)}"
        )
    emb = embedding(flat, weight, None, max_norm, norm_type, scale_grad_by_freq, sparse)
    n, b, dim = flat.shape[0], len(starts), weight.shape[1]
    # each position's bag (bags are contiguous runs; empty bags own none), kept unless it is
    # past the last bag or holds padding_idx
    pos = np.arange(n)
    bag = np.searchsorted(starts, pos, side="right") - 1
    keep = pos < (ends[-1] if b else 0)
    if padding_idx is not None:
        keep &= flat.numpy() != padding_idx % weight.shape[0]
    sel, bag = pos[keep], bag[keep]
    counts = np.bincount(bag, minlength=b)
    if mode == "max":
        k = max(int(counts.max()) if b else 0, 1)
        idx = np.full((b, k), n, np.int64)  # position n: the -inf row appended below
        idx[bag, np.arange(sel.size) - np.searchsorted(bag, bag)] = sel
        ninf = full((1, dim), float("-inf"), dtype=weight.dtype)
        rows = index_select(cat([emb, ninf], 0), 0, _const(idx.reshape(-1)))
        out = rows.reshape(b, k, dim).max(1).values
        return E.where(_const((counts > 0)[:, None]), out, 0.0)
    if per_sample_weights is not None:
        emb = emb * per_sample_weights.reshape(n, 1)
    rows = index_select(emb, 0, _const(sel))
    if mode == "mean":
        rows = rows / _const(np.maximum(counts, 1)[bag][:, None]).to(weight.dtype)
    return zeros(b, dim, dtype=weight.dtype).index_add(0, _const(bag), rows)
