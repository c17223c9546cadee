"""Losses: cross_entropy (one fused op for class-index targets), nll_loss, the regression losses
(mse, l1, smooth_l1, huber), binary cross-entropy (on probabilities and on logits), kl_div,
poisson_nll_loss and the embedding, ranking and triplet margin losses (the soft margin ones are in
loss_margin.py). Each is a composition of tensor
ops, differentiated by autograd with no backward of its own (cross_entropy's fused op has one).
"""

from __future__ import annotations

import math

import numpy as np

from ... import _caller_warnings as caller_warnings
from ... import dtypes as D
from ...autograd.grad_mode import no_grad
from ...errors import DTypeError, ShapeError
from ...ops import elementwise as E
from ...ops import nn as nn_ops
from ...ops import unary as U
from ...ops.common import broadcast_shapes, check_indices, host_quiet
from ...ops.reduce import SUM
from ...ops.registry import CAPTURE, apply, capturing
from ...tensor import Tensor
from ._utils import _check_reduction, _check_tensor, _reduce
from .distance import pairwise_distance
from .loss_fused import reduced_cross_entropy


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
    if (
        weight is None
        and not label_smoothing
        and type(input) is Tensor
        and type(target) is Tensor
        and input._dev is None
        and target._dev is None
        and (CAPTURE[0] is None or capturing() is None)
        and size_average is None
        and reduce is None
    ):
        # the common case (host logits [N, C], int64 class indices [N], no weight or smoothing)
        # without the general checks: this runs at every training step
        x, t = input._data, target._data
        dt = input._dtype
        if (
            (dt is D.float32 or dt is D.float64)
            and target._dtype is D.int64
            and x.ndim == 2
            and t.ndim == 1
            and t.shape[0] == x.shape[0]
        ):
            if reduction in ("mean", "sum", "none"):  # else the general checks raise
                if reduction != "none":
                    # one graph node for rows, sum and division (loss_fused.py: the same bits)
                    out = reduced_cross_entropy(input, target, ignore_index, reduction == "mean")
                    if out is not None:
                        return out
                rows = apply(
                    nn_ops.XENT, input.contiguous(), target.contiguous(), ignore_index=ignore_index
                )[0]
                # the general path's tail (the same ops, the same bits); the count only for mean
                denom = _host_count(t, ignore_index) if reduction == "mean" else 0
                return _xent_reduce(rows, reduction, denom, None)
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
    expected = (
        None
        if input.ndim < 2
        else (tuple(input.shape) if probs else (input.shape[0],) + tuple(input.shape[2:]))
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
        logp = nn_ops.log_softmax(input, 1)
        if weight is not None:
            logp = logp * weight
        rows = -(logp * target).sum(1)
        denom = input.shape[0]
    else:
        rows = nn_ops.cross_entropy_rows(input, target, ignore_index)  # 0 where ignored
        valid = None
        # under a capture the count must be a graph op: a host count of the example's targets
        # would fix the denominator for every input
        graph_count = target._dev is not None or capturing() is not None
        if weight is not None or label_smoothing > 0 or graph_count:
            valid = target != ignore_index
        if weight is not None:
            wt = weight[target.masked_fill(~valid, 0)] * valid.to(input.dtype)
            rows = rows * wt
            denom = wt.sum()
        elif valid is None:
            # host targets: count them on the host (a constant for autograd) instead of 4 ops
            denom = _host_count(target._data, ignore_index)
        elif target._dev is not None:
            # a float32 count (exact to 2**24) stays on the device, which has no bool-to-int64
            # sum: no host round trip per step, and a captured step can replay it
            denom = valid.to(D.float32).sum()
        else:
            denom = valid.sum()
        if label_smoothing > 0:
            logp = nn_ops.log_softmax(input, 1)
            if weight is not None:
                logp = logp * weight
            smooth = (-logp.sum(1)).masked_fill(~valid, 0.0)
            rows = rows * (1 - label_smoothing) + smooth * (label_smoothing / c)
    return _xent_reduce(rows, reduction, denom, out_shape)


def _host_count(t: np.ndarray, ignore_index: int) -> int:
    """The mean's divisor for host class indices t: the targets that are not ignore_index (a
    constant for autograd)."""
    return int(np.count_nonzero(t != ignore_index))


def _xent_reduce(rows: Tensor, reduction: str, denom, out_shape: tuple | None) -> Tensor:
    """cross_entropy's tail, one source for its shortcut and its general path: the per-entry
    losses rows as they are ('none'; reshaped to out_shape unless None), summed, or summed and
    divided by denom (an int or a Tensor; nan when every target is ignored, as PyTorch)."""
    if reduction == "none":
        return rows if out_shape is None else rows.reshape(out_shape)
    total = apply(SUM, rows, dims=tuple(range(rows.ndim)), keepdim=False, shape=rows.shape)
    return total if reduction == "sum" else total / denom


def _check_pair(op: str, input, target, same_shape: bool) -> None:
    _check_tensor(op, input)
    _check_tensor(op, target, "target")
    if tuple(target.shape) != tuple(input.shape):
        if same_shape:
            raise ShapeError(
                f"{op}(): target size {tuple(target.shape)} must be the same as input size "
                f"{tuple(input.shape)}"
            )
        caller_warnings.warn(
            f"{op}(): using a target size ({tuple(target.shape)}) that is different to the "
            f"input size ({tuple(input.shape)}); they will be broadcast, which is likely not "
            "what you want",
            UserWarning,
        )


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of log-probabilities input [N, C] (or [C], or [N, C, d1, ...])
    at the int64 class indices target [N] ([], [N, d1, ...]).

    weight: per-class rescaling [C]; 'mean' divides by the summed weights of the targets that
    are not ignore_index (nan when all are ignored, as PyTorch).
    """
    _check_reduction("nll_loss", reduction, size_average, reduce)
    _check_tensor("nll_loss", input)
    if not isinstance(target, Tensor) or target.dtype is not D.int64:
        raise DTypeError(
            "nll_loss(): target must be an int64 tensor of class indices"
            + (f", got {target.dtype}" if isinstance(target, Tensor) else "")
        )
    squeeze = input.ndim == 1
    if squeeze:
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    expected = None if input.ndim < 2 else (input.shape[0],) + tuple(input.shape[2:])
    if expected is None or tuple(target.shape) != expected:
        raise ShapeError(
            f"nll_loss(): input of shape {tuple(input.shape)} needs a target of shape "
            f"{expected}, got {tuple(target.shape)}"
        )
    c = input.shape[1]
    out_shape = () if squeeze else expected
    if input.ndim > 2:
        input = input.movedim(1, -1).reshape(-1, c)
        target = target.reshape(-1)
    valid = target != ignore_index
    safe = target.masked_fill(~valid, 0)
    check_indices("nll_loss", safe, c, "the class dim")
    picked = input.gather(1, safe.unsqueeze(1)).squeeze(1)
    if weight is not None:
        if not isinstance(weight, Tensor) or tuple(weight.shape) != (c,):
            raise ShapeError(
                f"nll_loss(): weight must be a tensor of shape ({c},) (one per class), got "
                f"{tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}"
            )
        wt = weight.to(input.dtype)[safe] * valid.to(input.dtype)
    else:
        wt = valid.to(input.dtype)
    rows = -picked * wt
    if reduction == "none":
        return rows.reshape(out_shape)
    if reduction == "sum":
        return rows.sum()
    return rows.sum() / wt.sum()


def mse_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """(input - target)^2, reduced."""
    _check_reduction("mse_loss", reduction, size_average, reduce)
    _check_pair("mse_loss", input, target, False)
    d = input - target
    return _reduce(d * d, reduction)


def l1_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """|input - target|, reduced."""
    _check_reduction("l1_loss", reduction, size_average, reduce)
    _check_pair("l1_loss", input, target, False)
    return _reduce((input - target).abs(), reduction)


def smooth_l1_loss(
    input: Tensor,
    target: Tensor,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """0.5 * d^2 / beta where |d| < beta, else |d| - 0.5 * beta (d = input - target); beta = 0
    is the L1 loss."""
    _check_reduction("smooth_l1_loss", reduction, size_average, reduce)
    _check_pair("smooth_l1_loss", input, target, False)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss(): beta must be non-negative, got {beta}")
    d = input - target
    ad = d.abs()
    if beta == 0:
        return _reduce(ad, reduction)
    return _reduce(E.where(ad < beta, d * d * (0.5 / beta), ad - 0.5 * beta), reduction)


def huber_loss(
    input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0
) -> Tensor:
    """0.5 * d^2 where |d| < delta, else delta * (|d| - 0.5 * delta) (d = input - target)."""
    _check_reduction("huber_loss", reduction)
    _check_pair("huber_loss", input, target, False)
    if delta <= 0:
        raise ValueError(f"huber_loss(): delta must be positive, got {delta}")
    d = input - target
    ad = d.abs()
    out = _reduce(E.where(ad < delta, d * d * 0.5, (ad - 0.5 * delta) * delta), reduction)
    return _as_dtype_of(out, input)


def _log_clamped(x: Tensor) -> Tensor:
    """max(log(x), -100) for x in [0, 1], with finite gradients at 0 (PyTorch's BCE clamp)."""
    pos = x > 0
    return E.where(pos, E.where(pos, x, 1.0).log().clamp(min=-100.0), -100.0)


def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """-w * (t * log(x) + (1 - t) * log(1 - x)) for probabilities x in [0, 1], each log clamped
    at -100 as PyTorch. Where a log is clamped (x within e^-100 of 0 or 1) the gradient is that
    of the clamped value, 0, where PyTorch's hand-written backward gives (x - t) / 1e-12."""
    _check_reduction("binary_cross_entropy", reduction, size_average, reduce)
    _check_pair("binary_cross_entropy", input, target, True)
    with no_grad():
        # a check only (the graph does not depend on it): not a host read a capture refuses
        bad = bool(host_quiet(((input < 0) | (input > 1)).any()))
    if bad:
        raise ValueError("binary_cross_entropy(): all elements of input should be in [0, 1]")
    loss = -(target * _log_clamped(input) + (1 - target) * _log_clamped(1 - input))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Sigmoid + binary cross-entropy in one stable formula:
    ``(1 - t) * x + (1 + (pos_weight - 1) * t) * softplus(-x)``, times weight."""
    _check_reduction("binary_cross_entropy_with_logits", reduction, size_average, reduce)
    _check_pair("binary_cross_entropy_with_logits", input, target, True)
    sp = U.softplus(-input)  # -log(sigmoid(x)), stable
    if pos_weight is not None:
        sp = sp * ((pos_weight - 1) * target + 1)
    loss = (1 - target) * input + sp
    if weight is not None:
        loss = loss * weight
    return _as_dtype_of(_reduce(loss, reduction), target)


def _as_dtype_of(out: Tensor, ref: Tensor) -> Tensor:
    """``out`` in ``ref``'s float dtype: PyTorch's result type for losses whose kernel writes
    in one operand's dtype (huber_loss and soft_margin_loss: the input's;
    binary_cross_entropy_with_logits: the target's), whatever the other operand's is."""
    dt = ref.dtype
    return out if out.dtype is dt or not dt.is_floating_point else out.to(dt)


def _check_same_shape(op: str, *named) -> None:
    shapes = [tuple(t.shape) for _, t in named]
    if any(s != shapes[0] for s in shapes):
        raise ShapeError(
            f"{op}(): "
            + ", ".join(f"{n} {s}" for (n, _), s in zip(named, shapes))
            + " must have the same shape"
        )


def kl_div(
    input: Tensor,
    target: Tensor,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """Kullback-Leibler divergence of target from input, input holding log-probabilities:
    target * (log(target) - input) (0 where target is 0), or exp(target) * (target - input)
    with log_target. reduction: 'mean' (over all elements, with PyTorch's warning), 'batchmean'
    (sum / batch size: the KL divergence), 'sum' or 'none'."""
    if reduction != "batchmean":
        _check_reduction("kl_div", reduction, size_average, reduce)
    elif size_average is not None or reduce is not None:
        _check_reduction("kl_div", "mean", size_average, reduce)
    _check_tensor("kl_div", input)
    _check_tensor("kl_div", target, "target")
    if reduction == "mean":
        caller_warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support "
            "size. 'batchmean' divides only by the batch size, and aligns with the KL div math "
            "definition. 'mean' will be changed to behave the same as 'batchmean' in the next "
            "major release.",
            UserWarning,
        )
    if log_target:
        loss = target.exp() * (target - input)
    else:
        # xlogy(t, t): 0 where t == 0; the log sees 1 there so its gradient stays finite.
        zero = target == 0
        tlogt = E.where(zero, 0.0, target * E.where(zero, 1.0, target).log())
        loss = tlogt - target * input
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)


def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    size_average=None,
    eps: float = 1e-8,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Poisson negative log-likelihood: exp(input) - target * input (log_input), else
    input - target * log(input + eps); full adds Stirling's term for target > 1."""
    _check_reduction("poisson_nll_loss", reduction, size_average, reduce)
    _check_tensor("poisson_nll_loss", input)
    _check_tensor("poisson_nll_loss", target, "target")
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        big = target > 1
        t = E.where(big, target, 2.0)  # the masked entries must not take log(0) into the grads
        stirling = t * t.log() - t + (t * (2 * math.pi)).log() * 0.5
        loss = loss + E.where(big, stirling, 0.0)
    return _reduce(loss, reduction)


def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1; cos over
    the last dim of [N, D] (target [N]) or [D] (target [])."""
    op = "cosine_embedding_loss"
    _check_reduction(op, reduction, size_average, reduce)
    _check_tensor(op, input1, "input1")
    _check_tensor(op, input2, "input2")
    _check_tensor(op, target, "target", floating=False)
    if target.ndim > 1:
        raise ShapeError(f"{op}(): 0D or 1D target tensor expected, multi-target not supported")
    if (
        input1.ndim != target.ndim + 1
        or tuple(input1.shape) != tuple(input2.shape)
        or (target.ndim and target.shape[0] != input1.shape[0])
    ):
        raise ShapeError(
            f"{op}(): a {target.ndim}D target of shape {tuple(target.shape)} needs "
            f"{target.ndim + 1}D inputs of one shape, with {'N' if target.ndim else 'no'} "
            f"rows; got input1 {tuple(input1.shape)} and input2 {tuple(input2.shape)}"
        )
    if not target.dtype.is_floating_point:
        target = target.to(input1.dtype)
    # PyTorch's formula: eps added to each squared magnitude, not a clamp of the norms.
    prod = (input1 * input2).sum(-1)
    mag1 = (input1 * input1).sum(-1) + 1e-12
    mag2 = (input2 * input2).sum(-1) + 1e-12
    cos = prod / (mag1 * mag2).sqrt()
    pos = E.where(target == 1, 1 - cos, 0.0)
    neg = E.where(target == -1, (cos - margin).clamp(min=0.0), 0.0)
    return _reduce(pos + neg, reduction)


def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """max(0, -target * (input1 - input2) + margin), target in {1, -1}."""
    op = "margin_ranking_loss"
    _check_reduction(op, reduction, size_average, reduce)
    _check_tensor(op, input1, "input1")
    _check_tensor(op, input2, "input2")
    _check_tensor(op, target, "target", floating=False)
    if not input1.ndim == input2.ndim == target.ndim:
        raise ShapeError(
            f"{op}(): all input tensors should have the same number of dims, got input1 "
            f"{tuple(input1.shape)}, input2 {tuple(input2.shape)} and target "
            f"{tuple(target.shape)}"
        )
    broadcast_shapes(op, input1.shape, input2.shape, target.shape)
    loss = (-target * (input1 - input2) + margin).clamp(min=0.0)
    return _reduce(loss, reduction)


def hinge_embedding_loss(
    input: Tensor,
    target: Tensor,
    margin: float = 1.0,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """x where target is 1, max(0, margin - x) where it is -1 (as PyTorch: both terms for a
    target that is neither)."""
    op = "hinge_embedding_loss"
    _check_reduction(op, reduction, size_average, reduce)
    _check_tensor(op, input)
    _check_tensor(op, target, "target", floating=False)
    broadcast_shapes(op, input.shape, target.shape)
    # PyTorch compares in the target's dtype, where -1 wraps: 255 counts as -1 in uint8
    neg_one = 255 if target.dtype is D.uint8 else -1
    if not target.dtype.is_floating_point and neg_one == -1:
        target = target.to(input.dtype)  # (bool and signed ints: compared as floats)
    margin_term = E.where(target != 1, (margin - input).clamp(min=0.0), 0.0)
    self_term = E.where(target != neg_one, input, 0.0)
    return _reduce(margin_term + self_term, reduction)


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """max(0, margin + d(a, p) - d(a, n)) with d the pairwise_distance (p-norm, eps); swap uses
    min(d(a, n), d(p, n)) as the negative distance."""
    op = "triplet_margin_loss"
    _check_reduction(op, reduction, size_average, reduce)
    for name, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        _check_tensor(op, t, name)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeError(
            f"{op}(): the anchor, positive, and negative tensors are expected to have the same "
            f"number of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, "
            f"and negative {negative.ndim}D inputs"
        )
    if margin <= 0:
        raise ValueError(f"{op}(): margin must be greater than 0, got {margin}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = E.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((d_pos - d_neg + margin).clamp(min=0.0), reduction)
