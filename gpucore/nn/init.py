"""Parameter initialisers with torch.nn.init's names and semantics.

Each fills its tensor in place under no_grad and returns it. Random values come from the Philox
stream (``gpucore.manual_seed`` or a ``generator=``), drawn in float32 as ``gpucore.rand``/
``randn`` do, so a seed gives the same weights on every device.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _caller_warnings as caller_warnings
from ..autograd.grad_mode import no_grad
from ..creation import from_numpy
from ..errors import ShapeError
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
    "trunc_normal_",
    "orthogonal_",
    "eye_",
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


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator=None,
) -> Tensor:
    """Fill with samples of N(mean, std^2) truncated to [a, b] (absolute bounds, as PyTorch's:
    not in units of std), by the inverse CDF: uniform samples between the CDF's values at a and
    b, through erfinv, clamped to [a, b] against rounding."""
    _check("trunc_normal_", tensor)
    mean, std, a, b = float(mean), float(std), float(a), float(b)
    if mean < a - 2 * std or mean > b + 2 * std:
        caller_warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
            "The distribution of values may be incorrect."
        )

    def cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    u = from_numpy(_uniform_f32(tuple(tensor.shape), 2 * lo - 1, 2 * hi - 1, generator))
    with no_grad():
        # in float32, cast only by the copy: a bfloat16 / float16 uniform sample near +-1 rounds
        # to 1, which erfinv takes to inf and the clamp to a bound
        values = u.erfinv_().mul_(std * math.sqrt(2.0)).add_(mean)
        tensor.copy_(values.clamp_(min=a, max=b))
    return tensor


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix times ``gain``: the Q of the QR decomposition of a
    standard normal [rows, numel / rows] matrix (of its transpose when wider than tall), its
    columns' signs fixed by R's diagonal so that Q is uniformly distributed (Haar)."""
    _check("orthogonal_", tensor)
    if tensor.ndim < 2:
        raise ShapeError(
            f"orthogonal_(): only tensors with 2 or more dimensions are supported, got shape "
            f"{tuple(tensor.shape)}"
        )
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _normal_f32((rows, cols), 0.0, 1.0, generator).astype(np.float64)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    with no_grad():
        tensor.copy_(from_numpy(np.ascontiguousarray(q * float(gain))).reshape(tensor.shape))
    return tensor


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity (ones on the main diagonal of a rectangle too)."""
    _check("eye_", tensor)
    if tensor.ndim != 2:
        raise ShapeError(f"eye_(): only 2-D tensors are supported, got shape {tuple(tensor.shape)}")
    with no_grad():
        tensor.copy_(from_numpy(np.eye(*tensor.shape)))
    return tensor
