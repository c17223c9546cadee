"""Parameter initialisers with torch.nn.init's names and semantics.

Each fills its tensor in place under no_grad and returns it. Random values come from the Philox
stream (``gpucore.manual_seed`` or a ``generator=``), drawn in float32 as ``gpucore.rand``/
``randn`` do, so a seed gives the same weights on every device.
"""

from __future__ import annotations

import math

from .. import _caller_warnings as caller_warnings
from ..autograd.grad_mode import no_grad
from ..creation import from_numpy
from ..ops.random import _normal_f32, _uniform_f32
from ..tensor import Tensor

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "constant_",
    "ones_",
    "zeros_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
]

_LINEAR = (
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "sigmoid",
)


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for a nonlinearity: 1 for linear/conv/sigmoid, 5/3 for tanh,
    sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu (slope = param, default 0.01),
    3/4 for selu."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = float(param)
        else:
            raise ValueError(f"calculate_gain(): negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain(): unsupported nonlinearity {nonlinearity!r}")


def _check(op: str, tensor) -> None:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}(): expected a gpucore Tensor, got {type(tensor).__name__}")
    if not tensor.dtype.is_floating_point:
        raise TypeError(f"{op}(): expected a floating point tensor, got {tensor.dtype}")


def _fill_random(tensor: Tensor, kind: str, a: float, b: float, generator) -> Tensor:
    shape = tuple(tensor.shape)
    if kind == "uniform":
        arr = _uniform_f32(shape, a, b, generator)
    else:
        arr = _normal_f32(shape, a, b, generator)
    with no_grad():
        tensor.copy_(from_numpy(arr))
    return tensor


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with samples of U(a, b)."""
    _check("uniform_", tensor)
    return _fill_random(tensor, "uniform", float(a), float(b), generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with samples of N(mean, std^2)."""
    _check("normal_", tensor)
    return _fill_random(tensor, "normal", float(mean), float(std), generator)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with val."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"constant_(): expected a gpucore Tensor, got {type(tensor).__name__}")
    with no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor: Tensor) -> Tensor:
    """Fill with 1."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with 0."""
    return constant_(tensor, 0.0)


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple:
    if tensor.ndim < 2:
        raise ValueError(
            "fan in and fan out can not be computed for a tensor with fewer than 2 dimensions "
            f"(shape {tuple(tensor.shape)})"
        )
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    _check("xavier_uniform_", tensor)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return _fill_random(tensor, "uniform", -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    _check("xavier_normal_", tensor)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _fill_random(tensor, "normal", 0.0, std, generator)


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator=None,
) -> Tensor:
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He et al., 2015); gain from
    calculate_gain(nonlinearity, a), fan from mode ('fan_in' or 'fan_out')."""
    _check("kaiming_uniform_", tensor)
    if tensor.numel() == 0:
        caller_warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return _fill_random(tensor, "uniform", -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator=None,
) -> Tensor:
    """N(0, std^2) with std = gain / sqrt(fan)."""
    _check("kaiming_normal_", tensor)
    if tensor.numel() == 0:
        caller_warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return _fill_random(tensor, "normal", 0.0, std, generator)
