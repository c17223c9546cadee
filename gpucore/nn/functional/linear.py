"""linear: ``input @ weight.T + bias`` as one registry op (one GEMM with the bias folded in);
linear_cross_entropy: cross_entropy of linear's logits."""

from __future__ import annotations

import math

from ... import _cpu
from ...autograd.grad_mode import _state as _grad_state
from ...errors import DTypeError, ShapeError
from ...ops.linalg import LINEAR
from ...ops.registry import AUTOCAST, CAPTURE, apply, capturing, record
from ...tensor import Tensor
from ._utils import _check_tensor
from .loss import cross_entropy

_fast_linear = _cpu.fast_linear


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``: input [..., in_features], weight [out_features, in_features],
    bias [out_features]."""
    if (CAPTURE[0] is None or capturing() is None) and AUTOCAST[0] is None:
        # the fast lane: host matrices of one float dtype (a model's Parameters included), in one
        # C call (cpu/python/fastpath.c fast_linear), or None; the same bits as the op's kernel
        out = _fast_linear(input, weight, bias)
        if out is not None:
            if _grad_state.enabled:
                ins = (input, weight) if bias is None else (input, weight, bias)
                record(LINEAR, ins, (out,), {})
            return out
    _check_tensor("linear", input)
    _check_tensor("linear", weight, "weight")
    if weight.ndim != 2 or input.ndim == 0 or input.shape[-1] != weight.shape[1]:
        raise ShapeError(
            f"linear(): input of shape {tuple(input.shape)} does not fit weight of shape "
            f"{tuple(weight.shape)}; expected input [..., {weight.shape[-1]}] and weight "
            "[out_features, in_features]"
        )
    if bias is not None:
        _check_tensor("linear", bias, "bias")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ShapeError(
            f"linear(): bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}"
        )
    lead = tuple(input.shape[:-1])
    x = input if input.ndim == 2 else input.reshape(-1, input.shape[-1])
    ins = (x, weight) if bias is None else (x, weight, bias)
    if not x.dtype.is_floating_point or any(t.dtype is not x.dtype for t in ins):
        raise DTypeError(
            "linear(): input, weight and bias must share one floating point dtype, got "
            f"{', '.join(str(t.dtype) for t in ins)}; convert them with .to(dtype)"
        )
    out = apply(LINEAR, *ins)
    return out if input.ndim == 2 else out.reshape(*lead, weight.shape[0])


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y[..., k] = input1 @ weight[k] @ input2 + bias[k]`` (torch.nn.functional.bilinear):
    input1 [..., in1], input2 [..., in2], weight [out, in1, in2], bias [out]; one matmul with
    weight, then a product with input2 summed over in2."""
    for what, t in (("input1", input1), ("input2", input2), ("weight", weight)):
        _check_tensor("bilinear", t, what)
    if (
        weight.ndim != 3
        or input1.ndim == 0
        or tuple(input1.shape[:-1]) != tuple(input2.shape[:-1])
        or input1.shape[-1] != weight.shape[1]
        or input2.shape[-1] != weight.shape[2]
    ):
        raise ShapeError(
            f"bilinear(): inputs of shapes {tuple(input1.shape)} and {tuple(input2.shape)} do not "
            f"fit weight of shape {tuple(weight.shape)}; expected [..., in1], [..., in2] and "
            "[out, in1, in2]"
        )
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ShapeError(
            f"bilinear(): bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}"
        )
    out_f, in1, in2 = weight.shape
    lead = tuple(input1.shape[:-1])
    x1 = input1.reshape(-1, in1)
    x2 = input2.reshape(x1.shape[0], 1, in2)
    t = x1.matmul(weight.permute(1, 0, 2).reshape(in1, out_f * in2))
    t = t.reshape(x1.shape[0], out_f, in2)
    out = (t * x2).sum(2)
    if bias is not None:
        out = out + bias
    return out.reshape(*lead, out_f)


def linear_cross_entropy(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    linear_bias: Tensor | None = None,
    weight: Tensor | None = None,
    reduction: str = "mean",
    ignore_index: int | None = None,
    label_smoothing: float = 0.0,
    options=None,
) -> Tensor:
    """cross_entropy(linear(input, linear_weight, linear_bias), target, ...), as
    torch.nn.functional.linear_cross_entropy: input [in] or [N, in]; linear_weight [C, in] or
    [C, d_1, ..., d_K, in] for a K-dimensional loss (batched input only), linear_bias shaped as
    its leading dims; target class indices or, shaped as the logits, probabilities;
    ignore_index None means -100 (and must stay None with probabilities). ``options`` (PyTorch's
    chunking of the batch to save memory) is accepted; the logits are computed whole."""
    _check_tensor("linear_cross_entropy", input)
    _check_tensor("linear_cross_entropy", linear_weight, "linear_weight")
    if input.ndim not in (1, 2):
        raise ShapeError(
            f"linear_cross_entropy(): expected input with dimensionality 1 or 2, got "
            f"{input.ndim} (shape {tuple(input.shape)})"
        )
    if linear_weight.ndim < 2:
        raise ShapeError(
            f"linear_cross_entropy(): expected linear_weight with dimensionality at least 2, "
            f"got {linear_weight.ndim}"
        )
    batches, in_features = tuple(input.shape[:-1]), input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise ShapeError(
            f"linear_cross_entropy(): expected equal input and linear_weight last dimensions "
            f"(in_features), got {in_features} and {linear_weight.shape[-1]}, respectively"
        )
    classes, out = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (classes, *out):
        raise ShapeError(
            f"linear_cross_entropy(): expected linear_bias shape {(classes, *out)}, got "
            f"{tuple(linear_bias.shape)}"
        )
    if out and not batches:
        raise ShapeError(
            f"linear_cross_entropy(): K-dimensional loss defined by linear_weight shape "
            f"{tuple(linear_weight.shape)} requires batched input, (N, {in_features}), got "
            f"unbatched input with shape {tuple(input.shape)}"
        )
    logits_shape = (*batches, classes, *out)
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise ValueError(
            "linear_cross_entropy(): ignore_index cannot be specified when target contains "
            "probabilities"
        )
    total = classes * math.prod(out)
    w = linear_weight.reshape(total, in_features) if out else linear_weight
    b = linear_bias.reshape(total) if out and linear_bias is not None else linear_bias
    logits = linear(input, w, b).reshape(logits_shape)
    return cross_entropy(
        logits,
        target,
        weight=weight,
        reduction=reduction,
        ignore_index=-100 if ignore_index is None else ignore_index,
        label_smoothing=label_smoothing,
    )
