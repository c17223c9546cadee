"""Functional neural-network ops with PyTorch's names and semantics."""

from __future__ import annotations

from .. import dtypes as D
from ..errors import DTypeError, ShapeError
from ..ops import elementwise as E
from ..ops import nnops
from ..tensor import Tensor


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0)."""
    return input.relu_() if inplace else E.relu(input)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU, exact (erf) by default or the tanh approximation with approximate='tanh'."""
    return E.gelu(input, approximate=approximate)


def sigmoid(input: Tensor) -> Tensor:
    return E.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    return E.tanh(input)


def softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """Softmax along dim (PyTorch requires dim; so do we)."""
    if dim is None:
        raise TypeError("softmax(): pass dim explicitly (e.g. dim=-1)")
    return nnops.softmax(input, dim, dtype=dtype)


def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    if dim is None:
        raise TypeError("log_softmax(): pass dim explicitly (e.g. dim=-1)")
    return nnops.log_softmax(input, dim, dtype=dtype)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding of class indices, with a trailing class dim."""
    from ..ops.indexing import one_hot as _one_hot

    return _one_hot(tensor, num_classes)


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding patches [N, C, H, W] -> [N, C*kh*kw, L] (torch.nn.functional.unfold; im2col)."""
    return nnops.im2col(input, kernel_size, stride=stride, padding=padding, dilation=dilation)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """The adjoint of unfold: sums [N, C*kh*kw, L] patches into [N, C, H, W] (col2im)."""
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    if input.ndim != 3 or input.shape[1] % (kh * kw):
        raise ShapeError(
            f"fold(): expected input [N, C*{kh}*{kw}, L], got shape {tuple(input.shape)}"
        )
    shape = (input.shape[0], input.shape[1] // (kh * kw), oh, ow)
    return nnops.col2im(input, shape, (kh, kw), stride=stride, padding=padding, dilation=dilation)


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy between logits [N, C] (or [N, C, d1, ...], or [C]) and a target of class
    indices [N, d1, ...] (int64) or class probabilities shaped like the input (floating), with
    torch.nn.functional.cross_entropy's arguments and semantics.

    weight: per-class rescaling [C]. reduction: 'mean' (weighted by the targets' weights over
    the entries that are not ignore_index; over N*d1*... for probabilities), 'sum' or 'none'.
    label_smoothing in [0, 1] mixes the target with the uniform distribution.
    """
    if size_average is not None or reduce is not None:
        raise TypeError(
            "cross_entropy(): size_average and reduce are deprecated in PyTorch and not "
            "supported; use reduction='mean', 'sum' or 'none'"
        )
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(
            f"cross_entropy(): reduction must be 'mean', 'sum' or 'none', got {reduction!r}"
        )
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(
            f"cross_entropy(): label_smoothing must be in [0, 1], got {label_smoothing}"
        )
    if not isinstance(input, Tensor) or not input.dtype.is_floating_point:
        raise DTypeError(
            "cross_entropy(): input must be a floating point tensor of logits"
            + (f", got {input.dtype}" if isinstance(input, Tensor) else "")
        )
    probs = isinstance(target, Tensor) and target.dtype.is_floating_point
    if not isinstance(target, Tensor) or (not probs and target.dtype is not D.int64):
        raise DTypeError(
            "cross_entropy(): target must be an int64 tensor of class indices or a floating "
            "tensor of class probabilities"
            + (f", got {target.dtype}" if isinstance(target, Tensor) else "")
        )
    squeeze = input.ndim == 1
    if squeeze:
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    expected = None if input.ndim < 2 else (
        tuple(input.shape) if probs else (input.shape[0],) + tuple(input.shape[2:])
    )
    if expected is None or tuple(target.shape) != expected:
        raise ShapeError(
            f"cross_entropy(): input of shape {tuple(input.shape)} needs a target of shape "
            f"{expected}, got {tuple(target.shape)}"
        )
    c = input.shape[1]
    if weight is not None:
        if not isinstance(weight, Tensor) or tuple(weight.shape) != (c,):
            raise ShapeError(
                f"cross_entropy(): weight must be a tensor of shape ({c},) (one per class), got "
                f"{tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}"
            )
        if weight.dtype is not input.dtype:
            weight = weight.to(input.dtype)
    out_shape = () if squeeze else (input.shape[0],) + tuple(input.shape[2:])
    if input.ndim > 2:
        input = input.movedim(1, -1).reshape(-1, c)
        target = target.movedim(1, -1).reshape(-1, c) if probs else target.reshape(-1)
    if probs:
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / c
        logp = nnops.log_softmax(input, 1)
        if weight is not None:
            logp = logp * weight
        rows = -(logp * target).sum(1)
        denom = input.shape[0]
    else:
        rows = nnops.cross_entropy_rows(input, target, ignore_index)  # 0 where ignored
        valid = target != ignore_index
        if weight is not None:
            wt = weight[target.masked_fill(~valid, 0)] * valid.to(input.dtype)
            rows = rows * wt
            denom = wt.sum()
        else:
            denom = valid.sum()
        if label_smoothing > 0:
            logp = nnops.log_softmax(input, 1)
            if weight is not None:
                logp = logp * weight
            smooth = (-logp.sum(1)).masked_fill(~valid, 0.0)
            rows = rows * (1 - label_smoothing) + smooth * (label_smoothing / c)
    if reduction == "none":
        return rows.reshape(out_shape)
    if reduction == "sum":
        return rows.sum()
    return rows.sum() / denom  # nan when every target is ignored, as PyTorch
