"""Fake quantization: quantize and dequantize in one step, in float, with a straight-through
gradient, for quantization-aware training (PyTorch's ``torch.fake_quantize_per_tensor_affine``,
``torch.fake_quantize_per_channel_affine`` and ``torch.ao.quantization.FakeQuantize``).

Forward, as PyTorch's CPU kernel (float32): ``q = round_half_even(fl32(x * fl32(1 / scale))) +
zero_point``; ``out = (clamp(q, quant_min, quant_max) - zero_point) * scale``. NaN gives
``(quant_min - zero_point) * scale``. Backward: the gradient passes where ``quant_min <= q <=
quant_max`` and is zero where the value was clipped (PyTorch's straight-through estimator).

The forward runs on the host (a Vulkan input is read back and the result moved to the device);
the backward is a gpucore multiply, differentiable again. The node is attached with the
registry's ``record`` (no registry op: nothing to dispatch), so ``gpucore.compile`` does not see
fake quantization (it is for training).
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as D
from ..autograd.grad_mode import is_grad_enabled
from ..creation import from_numpy, tensor
from ..errors import ArgumentTypeError, DTypeError, ShapeError
from ..nn.module import Module
from ..ops.registry import OpDef, record
from ..tensor import Tensor
from .observer import (
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    _with_args,
)
from .qtensor import (
    per_channel_affine,
    per_channel_symmetric,
    per_tensor_affine,
    per_tensor_symmetric,
)

__all__ = [
    "fake_quantize_per_tensor_affine",
    "fake_quantize_per_channel_affine",
    "FakeQuantizeBase",
    "FakeQuantize",
    "default_fake_quant",
    "default_weight_fake_quant",
    "default_per_channel_weight_fake_quant",
]


def _ste_backward(ctx, grad):
    (mask,) = ctx.saved
    return grad * mask, None


# A graph node type, not a registry op: its forward is fake_quantize_array below.
_STE = OpDef("fake_quantize", None, _ste_backward, (1,), (), None, True)


def fake_quantize_array(
    x: np.ndarray, scale, zero_point, quant_min: int, quant_max: int
) -> tuple[np.ndarray, np.ndarray]:
    """(values, mask) of fake quantization of float32 ``x`` (module docstring); ``scale`` and
    ``zero_point`` broadcast against ``x``."""
    scale = np.asarray(scale, dtype=np.float32)
    inv = np.float32(1) / scale
    with np.errstate(over="ignore"):  # huge values saturate
        q = np.rint(np.asarray(x * inv, dtype=np.float32)).astype(np.float64) + zero_point
    nan = np.isnan(q)
    mask = (q >= quant_min) & (q <= quant_max)
    q = np.clip(q, quant_min, quant_max)
    if nan.any():
        q[nan] = quant_min
    out = (q - zero_point).astype(np.float32) * scale
    return np.asarray(out, dtype=np.float32), mask


def _input(fn: str, x) -> np.ndarray:
    if not isinstance(x, Tensor):
        raise ArgumentTypeError(
            f"{fn}(): argument 'input' must be a float Tensor, not {type(x).__name__}"
        )
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{fn}(): input must be a floating point tensor, got {x.dtype}")
    return np.asarray(x.detach().float().numpy(), dtype=np.float32)


def _qrange(fn: str, quant_min, quant_max) -> None:
    for v in (quant_min, quant_max):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise ArgumentTypeError(
                f"{fn}(): quant_min and quant_max must be ints, got {type(v).__name__}"
            )
    if quant_min > quant_max:
        raise ValueError(
            f"{fn}(): quant_min ({quant_min}) must be less than or equal to quant_max ({quant_max})"
        )


def _finish(x: Tensor, out: np.ndarray, mask: np.ndarray) -> Tensor:
    """The output tensor (input's dtype and device) with the straight-through node."""
    y = from_numpy(out).to(x.dtype)
    if x.is_vulkan:
        y = y.to(x.device)
    if x._requires_grad and is_grad_enabled():
        m = from_numpy(mask.astype(np.float32)).to(x.dtype)
        if x.is_vulkan:
            m = m.to(x.device)
        record(_STE, (x, m), (y,), {})
    return y


def fake_quantize_per_tensor_affine(
    input: Tensor, scale, zero_point, quant_min: int, quant_max: int
) -> Tensor:
    """Quantize and dequantize ``input`` with one ``scale`` / ``zero_point`` (numbers or
    one-element tensors) over [quant_min, quant_max]; gradient 1 inside the range, 0 where
    clipped. As ``torch.fake_quantize_per_tensor_affine``."""
    fn = "fake_quantize_per_tensor_affine"
    x = _input(fn, input)
    _qrange(fn, quant_min, quant_max)
    s = _number(fn, scale, "scale", float)
    z = _number(fn, zero_point, "zero_point", int)
    if not (np.isfinite(s) and s > 0):
        raise ValueError(f"{fn}(): scale must be positive and finite, got {s!r}")
    if not quant_min <= z <= quant_max:
        raise ValueError(
            f"{fn}(): zero_point ({z}) must be between quant_min ({quant_min}) and quant_max "
            f"({quant_max})"
        )
    out, mask = fake_quantize_array(x, s, z, quant_min, quant_max)
    return _finish(input, out, mask)


def _number(fn: str, v, name: str, kind):
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise ShapeError(f"{fn}(): {name} must be one number, got shape {tuple(v.shape)}")
        v = v.item()
    if kind is int and isinstance(v, float) and v.is_integer():
        v = int(v)
    ok = numbers.Real if kind is float else numbers.Integral
    if isinstance(v, bool) or not isinstance(v, ok):
        raise ArgumentTypeError(f"{fn}(): {name} must be {kind.__name__}, not {type(v).__name__}")
    return kind(v)


def fake_quantize_per_channel_affine(
    input: Tensor, scale: Tensor, zero_point: Tensor, axis: int, quant_min: int, quant_max: int
) -> Tensor:
    """Fake quantization with one scale / zero point per slice along ``axis`` (``scale``: float
    tensor [C], ``zero_point``: integer tensor [C]), as
    ``torch.fake_quantize_per_channel_affine``."""
    fn = "fake_quantize_per_channel_affine"
    x = _input(fn, input)
    _qrange(fn, quant_min, quant_max)
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise ArgumentTypeError(f"{fn}(): axis must be an int, not {type(axis).__name__}")
    if not -x.ndim <= axis < max(x.ndim, 1) or x.ndim == 0:
        raise ShapeError(f"{fn}(): axis {axis} is out of range for an input of shape {x.shape}")
    axis %= x.ndim
    c = x.shape[axis]
    for name, v in (("scale", scale), ("zero_point", zero_point)):
        if not isinstance(v, Tensor):
            raise ArgumentTypeError(f"{fn}(): {name} must be a 1-d Tensor, not {type(v).__name__}")
        if v.dim() != 1 or v.shape[0] != c:
            raise ShapeError(
                f"{fn}(): {name} must have one entry per channel: shape ({c},) for axis {axis} "
                f"of an input of shape {x.shape}, got {tuple(v.shape)}"
            )
    if zero_point.dtype.is_floating_point:
        raise DTypeError(f"{fn}(): zero_point must be an integer tensor, got {zero_point.dtype}")
    s = np.asarray(scale.detach().float().numpy(), dtype=np.float32)
    z = np.asarray(zero_point.detach().numpy()).astype(np.int64)
    if not (np.isfinite(s) & (s > 0)).all():
        raise ValueError(f"{fn}(): every scale must be positive and finite")
    if c and (z.min() < quant_min or z.max() > quant_max):
        raise ValueError(
            f"{fn}(): zero_point values must lie between quant_min ({quant_min}) and quant_max "
            f"({quant_max})"
        )
    shape = [1] * x.ndim
    shape[axis] = -1
    out, mask = fake_quantize_array(x, s.reshape(shape), z.reshape(shape), quant_min, quant_max)
    return _finish(input, out, mask)


# ----------------------------------------------------------------------------- modules
class FakeQuantizeBase(Module):
    """Base of the fake-quantize modules: the ``fake_quant_enabled`` and ``observer_enabled``
    flags (uint8 buffers [1]) and their switches."""

    with_args = classmethod(_with_args)

    def __init__(self):
        super().__init__()
        self.register_buffer("fake_quant_enabled", tensor([1], dtype=D.uint8))
        self.register_buffer("observer_enabled", tensor([1], dtype=D.uint8))

    def enable_fake_quant(self, enabled: bool = True) -> None:
        """Fake-quantize in forward (or pass the input through with ``enabled=False``)."""
        self.fake_quant_enabled = tensor([1 if enabled else 0], dtype=D.uint8)

    def disable_fake_quant(self) -> None:
        """Pass the input through unchanged."""
        self.enable_fake_quant(False)

    def enable_observer(self, enabled: bool = True) -> None:
        """Update the observer and the qparams in forward (or freeze them)."""
        self.observer_enabled = tensor([1 if enabled else 0], dtype=D.uint8)

    def disable_observer(self) -> None:
        """Freeze the scale and zero point."""
        self.enable_observer(False)


class FakeQuantize(FakeQuantizeBase):
    """Observe, then fake-quantize with the observer's current (scale, zero_point): PyTorch's
    ``FakeQuantize``. ``observer`` is an observer class (or ``with_args`` factory) built with
    ``observer_kwargs``; ``quant_min``/``quant_max`` are passed on to it. Buffers: ``scale``
    (float32), ``zero_point`` (int32), [1] per tensor or [C] per channel."""

    def __init__(
        self,
        observer=MovingAverageMinMaxObserver,
        quant_min: int | None = None,
        quant_max: int | None = None,
        is_dynamic: bool = False,
        **observer_kwargs,
    ):
        super().__init__()
        if quant_min is not None and quant_max is not None:
            if quant_min > quant_max:
                raise ValueError(
                    f"FakeQuantize: quant_min ({quant_min}) must be <= quant_max ({quant_max})"
                )
            observer_kwargs.update({"quant_min": quant_min, "quant_max": quant_max})
        if is_dynamic:
            observer_kwargs["is_dynamic"] = is_dynamic
        self.activation_post_process = observer(**observer_kwargs)
        obs = self.activation_post_process
        self.quant_min, self.quant_max = obs.quant_min, obs.quant_max
        self.is_dynamic = is_dynamic
        self.register_buffer("scale", tensor([1.0]))
        self.register_buffer("zero_point", tensor([0], dtype=D.int32))
        self.dtype = obs.dtype
        self.qscheme = obs.qscheme
        self.ch_axis = getattr(obs, "ch_axis", -1)
        self.is_per_channel = self.qscheme in (per_channel_affine, per_channel_symmetric)
        if not self.is_per_channel and self.qscheme not in (
            per_tensor_affine,
            per_tensor_symmetric,
        ):
            raise ValueError(f"FakeQuantize: unsupported qscheme {self.qscheme!r}")

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:
        """The observer's (scale, zero_point)."""
        return self.activation_post_process.calculate_qparams()

    def forward(self, X: Tensor) -> Tensor:
        """Observe ``X`` (when enabled), then fake-quantize it (when enabled)."""
        if int(self.observer_enabled.item()) == 1:
            self.activation_post_process(X.detach())
            s, z = self.calculate_qparams()
            self.scale = s.float()
            self.zero_point = z.to(D.int32)
        if int(self.fake_quant_enabled.item()) == 1:
            if self.is_per_channel:
                X = fake_quantize_per_channel_affine(
                    X, self.scale, self.zero_point, self.ch_axis, self.quant_min, self.quant_max
                )
            else:
                X = fake_quantize_per_tensor_affine(
                    X, self.scale, self.zero_point, self.quant_min, self.quant_max
                )
        return X

    def extra_repr(self) -> str:
        return (
            f"fake_quant_enabled={self.fake_quant_enabled!r}, "
            f"observer_enabled={self.observer_enabled!r}, quant_min={self.quant_min}, "
            f"quant_max={self.quant_max}, dtype={self.dtype}, qscheme={self.qscheme}, "
            f"ch_axis={self.ch_axis}, scale={self.scale!r}, zero_point={self.zero_point!r}"
        )


default_fake_quant = FakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver,
    quant_min=0,
    quant_max=255,
    dtype=D.quint8,
    qscheme=per_tensor_affine,
    reduce_range=True,
)
default_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver,
    quant_min=-128,
    quant_max=127,
    dtype=D.qint8,
    qscheme=per_tensor_symmetric,
    reduce_range=False,
)
default_per_channel_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver,
    quant_min=-128,
    quant_max=127,
    dtype=D.qint8,
    qscheme=per_channel_symmetric,
    reduce_range=False,
    ch_axis=0,
)
