"""The multi-class and soft margin losses and the triplet loss with a custom distance:
multi_margin_loss, multilabel_margin_loss, soft_margin_loss, multilabel_soft_margin_loss,
triplet_margin_with_distance_loss (compositions, as PyTorch defines them)."""

from __future__ import annotations

import numpy as np

from ...errors import DTypeError, ShapeError
from ...ops import unary as U
from ...ops.elementwise import minimum
from ...tensor import Tensor
from ._utils import _check_reduction, _check_tensor, _const, _reduce
from .activation import logsigmoid, relu
from .distance import pairwise_distance
from .loss import _as_dtype_of, _check_same_shape


def _class_target(op: str, input: Tensor, target) -> tuple:
    """input as [N, C] and the int64 target [N] (0-d for a 1-D input), checked."""
    _check_tensor(op, input)
    if not isinstance(target, Tensor):
        raise TypeError(f"{op}(): target must be a gpucore Tensor, got {type(target).__name__}")
    if target.dtype.is_floating_point or target.dtype.name == "bool":
        raise DTypeError(f"{op}(): target must be an int64 tensor of classes, got {target.dtype}")
    if input.ndim not in (1, 2) or input.shape[-1] == 0:
        raise ShapeError(
            f"{op}(): Expected non-empty vector or matrix with optional 0-dim batch size, but "
            f"got: {list(input.shape)}"
        )
    return (input if input.ndim == 2 else input.unsqueeze(0)), input.ndim == 1


def _reduce_empty(op: str, loss: Tensor, reduction: str) -> Tensor:
    """_reduce, refusing the mean of an empty batch (PyTorch returns uninitialised memory)."""
    if reduction == "mean" and loss.numel() == 0:
        raise ValueError(f"{op}(): the mean loss of an empty batch is undefined")
    return _reduce(loss, reduction)


def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Multi-class hinge loss (torch.nn.functional.multi_margin_loss): for each sample,
    sum over the classes i != y of weight[y] * max(0, margin - x[y] + x[i])^p, divided by C.
    p is 1 or 2; input [N, C] or [C], target [N] (or 0-d) class indices."""
    _check_reduction("multi_margin_loss", reduction, size_average, reduce)
    if p not in (1, 2):
        raise ValueError("multi_margin_loss(): only p == 1 and p == 2 supported")
    x, vec = _class_target("multi_margin_loss", input, target)
    n, c = x.shape
    y = target.reshape(-1)
    if y.shape[0] != n:
        raise ShapeError(
            f"multi_margin_loss(): target tensor should be 1-D with size equal to the number of "
            f"input samples (batch size). Expected target size [{n}], but got "
            f"{list(target.shape)}"
        )
    ys = np.asarray(y.detach().cpu().numpy()).astype(np.int64)
    if ys.size and (ys.min() < 0 or ys.max() >= c):
        raise IndexError(f"multi_margin_loss(): target out of range [0, {c}): {ys.tolist()}")
    if weight is not None:
        _check_tensor("multi_margin_loss", weight, "weight")
        if weight.ndim != 1 or weight.shape[0] != c:
            raise ShapeError(
                f"multi_margin_loss(): inconsistent weight size, expected {c} but got "
                f"{list(weight.shape)}"
            )
    idx = _const(ys.reshape(n, 1))
    if x._dev is not None:
        idx = idx.to(x.device)
    xy = x.gather(1, idx)  # [N, 1]
    m = relu(margin - xy + x)
    if p == 2:
        m = m * m
    if weight is not None:
        m = m * weight.index_select(0, idx.reshape(-1)).unsqueeze(1)
    others = np.ones((n, c), bool)
    others[np.arange(n), ys] = False
    keep = _const(others, x.dtype)
    if x._dev is not None:
        keep = keep.to(x.device)
    loss = (m * keep).sum(1) / c
    if vec and target.ndim == 0:
        loss = loss.squeeze(0)
    return _reduce_empty("multi_margin_loss", loss, reduction)


def multilabel_margin_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """Multi-label hinge loss (torch.nn.functional.multilabel_margin_loss): target holds each
    sample's classes, ended by the first -1; the loss sums max(0, 1 - (x[j] - x[i])) over its
    classes j and the classes i not among them, divided by C."""
    _check_reduction("multilabel_margin_loss", reduction, size_average, reduce)
    x, vec = _class_target("multilabel_margin_loss", input, target)
    n, c = x.shape
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(
            f"multilabel_margin_loss(): inconsistent target size: {list(target.shape)} for input "
            f"of size: {list(input.shape)}"
        )
    ys = np.asarray(target.detach().cpu().numpy()).astype(np.int64).reshape(n, c)
    valid = np.cumprod(ys >= 0, axis=1).astype(bool)  # the labels before the first -1
    if (ys[valid] >= c).any() or (ys < -1).any():
        raise IndexError(f"multilabel_margin_loss(): target out of range [-1, {c}): {ys.tolist()}")
    is_target = np.zeros((n, c), bool)
    rows = np.repeat(np.arange(n), c).reshape(n, c)
    is_target[rows[valid], ys[valid]] = True
    mask = valid[:, :, None] & ~is_target[:, None, :]  # [N, j, i]
    idx = _const(np.where(valid, ys, 0))
    keep = _const(mask, x.dtype)
    if x._dev is not None:
        idx, keep = idx.to(x.device), keep.to(x.device)
    xy = x.gather(1, idx)  # [N, j]
    loss = (relu(1 - xy.unsqueeze(2) + x.unsqueeze(1)) * keep).sum((1, 2)) / c
    if vec:
        loss = loss.squeeze(0)
    return _reduce_empty("multilabel_margin_loss", loss, reduction)


def triplet_margin_with_distance_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    distance_function=None,
    margin: float = 1.0,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """Triplet loss with a distance of your choice
    (torch.nn.functional.triplet_margin_with_distance_loss): max(d(a, p) - d(a, n) + margin, 0),
    d pairwise_distance unless distance_function is given; swap uses min(d(a, n), d(p, n))."""
    _check_reduction("triplet_margin_with_distance_loss", reduction)
    for name, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        _check_tensor("triplet_margin_with_distance_loss", t, name)
    if not margin > 0:
        raise ValueError(
            f"triplet_margin_with_distance_loss(): margin must be greater than 0, got {margin}"
        )
    dims = (anchor.ndim, positive.ndim, negative.ndim)
    if len(set(dims)) != 1:
        raise ShapeError(
            "triplet_margin_with_distance_loss(): The anchor, positive, and negative tensors are "
            f"expected to have the same number of dimensions, but got: anchor {dims[0]}D, "
            f"positive {dims[1]}D, and negative {dims[2]}D inputs"
        )
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = minimum(d_neg, dist(positive, negative))
    return _reduce(relu(margin + d_pos - d_neg), reduction)


def soft_margin_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """log(1 + exp(-target * input)) (as a stable softplus), target in {1, -1}."""
    _check_reduction("soft_margin_loss", reduction, size_average, reduce)
    _check_tensor("soft_margin_loss", input)
    _check_tensor("soft_margin_loss", target, "target", floating=False)
    _check_same_shape("soft_margin_loss", ("input", input), ("target", target))
    if not target.dtype.is_floating_point:
        target = target.to(input.dtype)  # negated as a float: a uint8 -1 would wrap, a bool fail
    return _as_dtype_of(_reduce(U.softplus(-target * input), reduction), input)


def multilabel_soft_margin_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Per-class logistic loss -(t * logsigmoid(x) + (1 - t) * logsigmoid(-x)), times weight,
    averaged over the classes (last dim) of [N, C] (or [C])."""
    op = "multilabel_soft_margin_loss"
    _check_reduction(op, reduction, size_average, reduce)
    _check_tensor(op, input)
    _check_tensor(op, target, "target", floating=False)
    if input.ndim == 0:
        raise ShapeError(f"{op}(): expected a 1-D [C] or 2-D [N, C] input, got a scalar")
    _check_same_shape(op, ("input", input), ("target", target))
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(-1) / input.shape[-1]
    return _reduce(loss, reduction)
