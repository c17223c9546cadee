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


def cross_entropy(input: Tensor, target: Tensor, reduction: str = "mean",
                  ignore_index: int = -100) -> Tensor:
    """Cross-entropy between logits [N, C] (or [N, C, d1, ...]) and class indices [N, ...].

    reduction: 'mean' (over targets that are not ignore_index), 'sum' or 'none'.
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(
            f"cross_entropy(): reduction must be 'mean', 'sum' or 'none', got {reduction!r}"
        )
    if not isinstance(target, Tensor) or target.dtype is not D.int64:
        raise DTypeError(
            "cross_entropy(): target must be an int64 tensor of class indices"
            + (f", got {target.dtype}" if isinstance(target, Tensor) else "")
        )
    if input.ndim == 1:
        input, target = input.unsqueeze(0), target.reshape(1)
        squeeze = True
    else:
        squeeze = False
    if input.ndim < 2 or target.shape != (input.shape[0],) + tuple(input.shape[2:]):
        raise ShapeError(
            f"cross_entropy(): input of shape {tuple(input.shape)} needs target of shape "
            f"{(input.shape[0],) + tuple(input.shape[2:])}, got {tuple(target.shape)}"
        )
    extra = tuple(input.shape[2:])
    if extra:
        c = input.shape[1]
        input = input.movedim(1, -1).reshape(-1, c)
        flat_target = target.reshape(-1)
    else:
        flat_target = target
    rows = nnops.cross_entropy_rows(input, flat_target, ignore_index)
    if reduction == "none":
        if squeeze:
            return rows.reshape(())
        return rows.reshape(tuple(target.shape)) if extra else rows
    if reduction == "sum":
        return rows.sum()
    count = (flat_target != ignore_index).sum().item()
    return rows.sum() / count if count else rows.sum() * float("nan")
