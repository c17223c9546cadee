"""Argument checks and small helpers shared by the topics of gpucore.nn.functional."""

from __future__ import annotations

import operator

import numpy as np

from ...creation import tensor
from ...errors import DTypeError, ShapeError
from ...tensor import Tensor

_REDUCTIONS = ("mean", "sum", "none")


def _check_tensor(op: str, x, what: str = "input", floating: bool = True) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): {what} must be a gpucore Tensor, got {type(x).__name__}")
    if floating and not x.dtype.is_floating_point:
        raise DTypeError(f"{op}(): {what} must be a floating point tensor, got {x.dtype}")


def _pair(v, op: str, name: str, least: int) -> tuple:
    try:
        if isinstance(v, (tuple, list)):
            p = tuple(operator.index(e) for e in v)
            if len(p) == 1:
                p = p * 2
        else:
            p = (operator.index(v),) * 2
    except TypeError:
        p = ()
    if len(p) != 2 or any(e < least for e in p):
        raise ValueError(f"{op}(): {name} must be an int or a pair of ints >= {least}, got {v!r}")
    return p


def _single(v, op: str, name: str, least: int) -> int:
    """An int or a 1-tuple (PyTorch's _single) as an int >= least (conv1d's and the 1-d pools'
    arguments)."""
    try:
        p = tuple(operator.index(e) for e in v) if isinstance(v, (tuple, list)) else (v,)
        p = tuple(operator.index(e) for e in p)
    except TypeError:
        p = ()
    if len(p) != 1 or p[0] < least:
        raise ValueError(
            f"{op}(): {name} must be an int or a 1-tuple of ints >= {least}, got {v!r}"
        )
    return p[0]


def _as_4d(op: str, x) -> tuple:
    """[N, C, H, W] (or an unbatched [C, H, W], given a batch dim of 1), and whether it was."""
    _check_tensor(op, x)
    if x.ndim == 3:
        return x.unsqueeze(0), True
    if x.ndim != 4:
        raise ShapeError(
            f"{op}(): expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got shape "
            f"{tuple(x.shape)}"
        )
    return x, False


def _check_reduction(op: str, reduction: str, size_average=None, reduce=None) -> None:
    if size_average is not None or reduce is not None:
        raise TypeError(
            f"{op}(): size_average and reduce are deprecated in PyTorch and not supported; use "
            "reduction='mean', 'sum' or 'none'"
        )
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}(): reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def _const(arr: np.ndarray, dtype=None, device="cpu") -> Tensor:
    """A constant tensor (no grad) from integer or bool numpy data built from shapes, on
    ``device`` (the host unless told: never the default device of set_default_device, which
    would move an op's internal constants away from its inputs)."""
    return tensor(arr, dtype=dtype, device=device)
