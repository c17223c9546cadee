"""linear: ``input @ weight.T + bias`` as one registry op (one GEMM with the bias folded in)."""

from __future__ import annotations

from ...errors import DTypeError, ShapeError
from ...ops.linalg import LINEAR
from ...ops.registry import apply
from ...tensor import Tensor
from ._utils import _check_tensor


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``: input [..., in_features], weight [out_features, in_features],
    bias [out_features]."""
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
