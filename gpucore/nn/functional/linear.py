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
