"""Observers: modules that watch the tensors passing through them and choose quantization
parameters, with ``torch.ao.quantization.observer``'s names, arguments and arithmetic.

- ``MinMaxObserver``: the running min and max;
- ``MovingAverageMinMaxObserver``: their moving averages (``averaging_constant``);
- ``PerChannelMinMaxObserver`` / ``MovingAveragePerChannelMinMaxObserver``: the same per slice
  along ``ch_axis`` (for weights);
- ``HistogramObserver`` (``histogram.py``): a running histogram and PyTorch's L2 range search.

Each is a ``gpucore.nn.Module`` whose forward records its input and returns it unchanged;
``calculate_qparams()`` returns ``(scale, zero_point)``: float32 and int tensors of shape [1] (per
tensor) or [C] (per channel), computed as PyTorch (float32 arithmetic, eps floor on the scale):

- affine: ``scale = (max(max_val, 0) - min(min_val, 0)) / (qmax - qmin)``,
  ``zero_point = clamp(qmin - round(min(min_val, 0) / scale), qmin, qmax)``;
- symmetric: ``scale = max(-min(min_val, 0), max(max_val, 0)) / ((qmax - qmin) / 2)``,
  ``zero_point = 0`` for qint8 and 128 for quint8 (the middle of a custom range).

``reduce_range`` halves the range ([-64, 63], [0, 127]) for kernels whose int16 pair sums could
saturate; ``quant_min``/``quant_max`` set a custom range. Unlike PyTorch, an observer's state dict
cannot be loaded into one that has not yet seen data when the shapes differ (per-channel min/max
start empty): gpucore's ``load_state_dict`` has no resize hook.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import _caller_warnings as caller_warnings
from .. import dtypes as D
from ..creation import from_numpy
from ..errors import DTypeError, ShapeError
from ..nn.module import Module
from ..tensor import Tensor
from .qtensor import (
    per_channel_affine,
    per_channel_symmetric,
    per_tensor_affine,
    per_tensor_symmetric,
    qrange,
)

__all__ = [
    "ObserverBase",
    "UniformQuantizationObserverBase",
    "MinMaxObserver",
    "MovingAverageMinMaxObserver",
    "PerChannelMinMaxObserver",
    "MovingAveragePerChannelMinMaxObserver",
    "calculate_qmin_qmax",
]

EPS = float(np.finfo(np.float32).eps)
_PER_TENSOR = (per_tensor_affine, per_tensor_symmetric)
_PER_CHANNEL = (per_channel_affine, per_channel_symmetric)


def _with_args(cls_or_self, **kwargs):
    """A factory making instances with these arguments (PyTorch's ``with_args``)."""
    return functools.partial(cls_or_self, **kwargs)


def host_values(fn: str, x) -> np.ndarray:
    """The float32 values of an observed tensor, read to the host without autograd."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: expects a float Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{fn}: expects a floating point tensor, got {x.dtype}")
    return np.asarray(x.detach().float().numpy(), dtype=np.float32)


def calculate_qmin_qmax(
    quant_min: int | None,
    quant_max: int | None,
    has_customized_qrange: bool,
    dtype: D.dtype,
    reduce_range: bool,
) -> tuple[int, int]:
    """(quant_min, quant_max) an observer uses: the dtype's range, halved by ``reduce_range``,
    or the custom one (also halved by reduce_range, as PyTorch)."""
    if has_customized_qrange:
        n = quant_max - quant_min + 1
        limit = 2**32 if dtype is D.qint32 else 256
        if not 0 < n <= limit:
            raise ValueError(
                f"quantization range [{quant_min}, {quant_max}] must be non-empty and hold at "
                f"most {limit} values for {dtype}"
            )
        if reduce_range:
            quant_min, quant_max = quant_min // 2, quant_max // 2
        return quant_min, quant_max
    if dtype is D.qint32:
        return qrange(dtype)
    lo, hi = qrange(dtype)
    if reduce_range:
        return (-64, 63) if dtype is D.qint8 else (0, 127)
    return lo, hi


class ObserverBase(Module):
    """Base of the observers: ``forward`` records and returns its input, ``calculate_qparams``
    gives (scale, zero_point)."""

    with_args = classmethod(_with_args)

    def __init__(self, dtype, is_dynamic: bool = False):
        super().__init__()
        self.dtype = dtype
        self.is_dynamic = is_dynamic

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:
        """(scale, zero_point) for what the observer has seen."""
        raise NotImplementedError


class UniformQuantizationObserverBase(ObserverBase):
    """The observers' shared arguments and PyTorch's ``_calculate_qparams``."""

    def __init__(
        self,
        dtype=D.quint8,
        qscheme=per_tensor_affine,
        reduce_range: bool = False,
        quant_min: int | None = None,
        quant_max: int | None = None,
        eps: float = EPS,
        is_dynamic: bool = False,
    ):
        name = type(self).__name__
        if dtype not in (D.qint8, D.quint8, D.qint32):
            raise DTypeError(
                f"{name}: dtype must be gpucore.qint8, gpucore.quint8 or gpucore.qint32, got "
                f"{dtype!r}"
            )
        if qscheme not in _PER_TENSOR + _PER_CHANNEL:
            raise ValueError(
                f"{name}: qscheme must be gpucore.per_tensor_affine, per_tensor_symmetric, "
                f"per_channel_affine or per_channel_symmetric, got {qscheme!r}"
            )
        super().__init__(dtype, is_dynamic)
        self.qscheme = qscheme
        self.reduce_range = bool(reduce_range)
        self.register_buffer("eps", from_numpy(np.array([eps], dtype=np.float32)))
        self.has_customized_qrange = quant_min is not None and quant_max is not None
        if self.has_customized_qrange:
            for v in (quant_min, quant_max):
                if isinstance(v, bool) or not isinstance(v, int):
                    raise TypeError(f"{name}: quant_min and quant_max must be ints, got {v!r}")
            if not quant_min <= 0 <= quant_max or quant_min >= quant_max:
                raise ValueError(
                    f"{name}: the range [quant_min, quant_max] = [{quant_min}, {quant_max}] must "
                    "include 0 and quant_min must be below quant_max"
                )
        self.quant_min, self.quant_max = calculate_qmin_qmax(
            quant_min, quant_max, self.has_customized_qrange, dtype, self.reduce_range
        )
        symmetric = qscheme in (per_tensor_symmetric, per_channel_symmetric)
        if symmetric and self.reduce_range and dtype is D.quint8:
            raise ValueError(f"{name}: cannot reduce range for symmetric quantization for quint8")

    def _calculate_qparams(self, min_val: np.ndarray, max_val: np.ndarray):
        """PyTorch's formulas (module docstring) on float32 min/max arrays (0-d or [C])."""
        min_val = np.asarray(min_val, dtype=np.float32)
        max_val = np.asarray(max_val, dtype=np.float32)
        if min_val.size == 0 or (min_val.ndim == 0 and min_val == np.inf and max_val == -np.inf):
            caller_warnings.warn(
                "must run observer before calling calculate_qparams. Returning default values.",
            )
            return from_numpy(np.array([1.0], np.float32)), from_numpy(np.array([0], np.int64))
        if np.any(min_val > max_val):
            raise ValueError(
                f"{type(self).__name__}: min {min_val} should be less than max {max_val}"
            )
        qmin, qmax = self.quant_min, self.quant_max
        zero = np.float32(0)
        min_neg = np.minimum(min_val, zero)
        max_pos = np.maximum(max_val, zero)
        eps = self.eps.numpy()[0]
        if self.qscheme in (per_tensor_symmetric, per_channel_symmetric):
            max_pos = np.maximum(-min_neg, max_pos)
            scale = np.maximum(max_pos / np.float32((qmax - qmin) / 2), eps)
            mid = 0
            if self.dtype is D.quint8:
                mid = (qmin + qmax) // 2 if self.has_customized_qrange else 128
            zero_point = np.full(scale.shape, mid, dtype=np.int64)
        else:
            scale = np.maximum((max_pos - min_neg) / np.float32(qmax - qmin), eps)
            zp = qmin - np.rint(min_neg / scale).astype(np.int64)
            zero_point = np.clip(zp, qmin, qmax).astype(np.int32)
        scale = np.asarray(scale, dtype=np.float32).reshape(-1)
        return from_numpy(scale), from_numpy(np.asarray(zero_point).reshape(-1))

    def reset_min_max_vals(self) -> None:
        """Forget what was observed."""
        raise NotImplementedError(f"{type(self).__name__} cannot reset its min/max values")


class MinMaxObserver(UniformQuantizationObserverBase):
    """Records the running min and max of its inputs (per tensor) and derives the quantization
    parameters from them (PyTorch's ``MinMaxObserver``)."""

    def __init__(
        self,
        dtype=D.quint8,
        qscheme=per_tensor_affine,
        reduce_range: bool = False,
        quant_min: int | None = None,
        quant_max: int | None = None,
        eps: float = EPS,
        is_dynamic: bool = False,
    ):
        if qscheme not in _PER_TENSOR:
            raise ValueError(
                f"{type(self).__name__}'s qscheme only supports gpucore.per_tensor_affine and "
                f"gpucore.per_tensor_symmetric, got {qscheme!r}; use PerChannelMinMaxObserver"
            )
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps, is_dynamic)
        self.register_buffer("min_val", from_numpy(np.array(np.inf, np.float32)))
        self.register_buffer("max_val", from_numpy(np.array(-np.inf, np.float32)))

    def _update(self, lo: np.float32, hi: np.float32) -> None:
        self.min_val = from_numpy(np.asarray(np.minimum(self.min_val.numpy(), lo), np.float32))
        self.max_val = from_numpy(np.asarray(np.maximum(self.max_val.numpy(), hi), np.float32))

    def forward(self, x_orig: Tensor) -> Tensor:
        """Record the min and max of ``x_orig``; returns it unchanged."""
        x = host_values(type(self).__name__, x_orig)
        if x.size:
            self._update(x.min(), x.max())
        return x_orig

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:
        """(scale [1] float32, zero_point [1] int) from the recorded min and max."""
        return self._calculate_qparams(self.min_val.numpy(), self.max_val.numpy())

    def extra_repr(self) -> str:
        return f"min_val={float(self.min_val.item())}, max_val={float(self.max_val.item())}"

    def reset_min_max_vals(self) -> None:
        """Forget what was observed."""
        self.min_val = from_numpy(np.array(np.inf, np.float32))
        self.max_val = from_numpy(np.array(-np.inf, np.float32))


class MovingAverageMinMaxObserver(MinMaxObserver):
    """Like MinMaxObserver, with moving averages: ``min = min + c * (min(x) - min)`` (the first
    input sets them), c = ``averaging_constant`` (PyTorch's ``MovingAverageMinMaxObserver``)."""

    def __init__(
        self,
        averaging_constant: float = 0.01,
        dtype=D.quint8,
        qscheme=per_tensor_affine,
        reduce_range: bool = False,
        quant_min: int | None = None,
        quant_max: int | None = None,
        eps: float = EPS,
        is_dynamic: bool = False,
    ):
        if is_dynamic and averaging_constant != 1:
            raise ValueError(
                f"MovingAverageMinMaxObserver: dynamic quantization needs averaging_constant=1, "
                f"got {averaging_constant}"
            )
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps, is_dynamic)
        self.averaging_constant = averaging_constant

    def _update(self, lo: np.float32, hi: np.float32) -> None:
        mn, mx = self.min_val.numpy(), self.max_val.numpy()
        if mn == np.inf and mx == -np.inf:
            mn, mx = lo, hi
        else:
            c = np.float32(self.averaging_constant)
            mn = mn + c * (lo - mn)
            mx = mx + c * (hi - mx)
        self.min_val = from_numpy(np.asarray(mn, dtype=np.float32))
        self.max_val = from_numpy(np.asarray(mx, dtype=np.float32))


class PerChannelMinMaxObserver(UniformQuantizationObserverBase):
    """Records the running min and max of each slice along ``ch_axis`` (PyTorch's
    ``PerChannelMinMaxObserver``): ``calculate_qparams`` gives one scale and zero point per
    channel, as ``quantize_per_channel`` takes them."""

    def __init__(
        self,
        ch_axis: int = 0,
        dtype=D.quint8,
        qscheme=per_channel_affine,
        reduce_range: bool = False,
        quant_min: int | None = None,
        quant_max: int | None = None,
        eps: float = EPS,
        is_dynamic: bool = False,
    ):
        if qscheme not in _PER_CHANNEL:
            raise ValueError(
                f"{type(self).__name__}'s qscheme only supports gpucore.per_channel_affine and "
                f"gpucore.per_channel_symmetric, got {qscheme!r}"
            )
        if is_dynamic:
            raise ValueError(f"{type(self).__name__} doesn't support dynamic quantization")
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps, is_dynamic)
        if isinstance(ch_axis, bool) or not isinstance(ch_axis, int):
            raise TypeError(f"{type(self).__name__}: ch_axis must be an int, got {ch_axis!r}")
        self.ch_axis = ch_axis
        self.register_buffer("min_val", from_numpy(np.zeros(0, np.float32)))
        self.register_buffer("max_val", from_numpy(np.zeros(0, np.float32)))

    def _channels(self, x: np.ndarray) -> np.ndarray:
        name = type(self).__name__
        if not -x.ndim <= self.ch_axis < x.ndim:
            raise ShapeError(
                f"{name}: ch_axis {self.ch_axis} is out of range for an input of shape {x.shape}"
            )
        y = np.moveaxis(x, self.ch_axis, 0).reshape(x.shape[self.ch_axis], -1)
        n = self.min_val.numel()
        if n and y.shape[0] != n:
            raise ShapeError(
                f"{name}: input has {y.shape[0]} channels along axis {self.ch_axis}, but the "
                f"observer has seen {n}; call reset_min_max_vals() first"
            )
        return y

    def forward(self, x_orig: Tensor) -> Tensor:
        """Record each channel's min and max of ``x_orig``; returns it unchanged."""
        x = host_values(type(self).__name__, x_orig)
        if x.size == 0:
            return x_orig
        y = self._channels(x)
        lo, hi = y.min(axis=1), y.max(axis=1)
        if self.min_val.numel():
            lo, hi = self._combine(lo, hi)
        self.min_val = from_numpy(np.asarray(lo, dtype=np.float32))
        self.max_val = from_numpy(np.asarray(hi, dtype=np.float32))
        return x_orig

    def _combine(self, lo: np.ndarray, hi: np.ndarray):
        return np.minimum(lo, self.min_val.numpy()), np.maximum(hi, self.max_val.numpy())

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:
        """(scales [C] float32, zero_points [C] int) from the recorded per-channel min/max."""
        return self._calculate_qparams(self.min_val.numpy(), self.max_val.numpy())

    def extra_repr(self) -> str:
        return f"min_val={self.min_val!r}, max_val={self.max_val!r}"

    def reset_min_max_vals(self) -> None:
        """Forget what was observed."""
        self.min_val = from_numpy(np.zeros(0, np.float32))
        self.max_val = from_numpy(np.zeros(0, np.float32))


class MovingAveragePerChannelMinMaxObserver(PerChannelMinMaxObserver):
    """PerChannelMinMaxObserver with moving averages of the per-channel min and max (PyTorch's
    ``MovingAveragePerChannelMinMaxObserver``)."""

    def __init__(
        self,
        averaging_constant: float = 0.01,
        ch_axis: int = 0,
        dtype=D.quint8,
        qscheme=per_channel_affine,
        reduce_range: bool = False,
        quant_min: int | None = None,
        quant_max: int | None = None,
        eps: float = EPS,
        is_dynamic: bool = False,
    ):
        super().__init__(
            ch_axis, dtype, qscheme, reduce_range, quant_min, quant_max, eps, is_dynamic
        )
        self.averaging_constant = averaging_constant

    def _combine(self, lo: np.ndarray, hi: np.ndarray):
        c = np.float32(self.averaging_constant)
        mn, mx = self.min_val.numpy(), self.max_val.numpy()
        return mn + c * (lo - mn), mx + c * (hi - mx)
