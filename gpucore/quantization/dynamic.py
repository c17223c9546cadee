"""Dynamically quantized layers (PyTorch's ``torch.ao.nn.quantized.dynamic``): ``Linear``.

Weights are quantized once, when the layer is made from a float one (``from_float``): int8,
symmetric, one scale per output channel (``PerChannelMinMaxObserver(dtype=qint8,
qscheme=per_channel_symmetric)``, as PyTorch's ``per_channel_dynamic_qconfig``). Activations are
quantized on every call, uint8, affine, one scale and zero point per call from the input's own
min and max; the product accumulates in int32 and the output is float32
(``kernels.linear_int8``; on the Vulkan device ``kernels.device_linear_int8``, where a float
Linear of the same shapes would run there, with the same bits). Inference only: the output has
no autograd history.

State dict (plain tensors, so ``gpucore.save`` and ``load_state_dict`` work as for float
layers, at a quarter of the size): ``weight`` (int8 [out, in]), ``weight_scale`` (float64 [out]),
``weight_zero_point`` (int64 [out], zeros) and ``bias`` (float32 [out], when present). The layer
keeps them outside its buffers, so ``model.half()`` or ``model.to('vulkan')`` leave them as they
are; ``weight()`` returns the weight as a per-channel ``QuantizedTensor``, as PyTorch.
"""

from __future__ import annotations

import copy

import numpy as np

from .. import dtypes as D
from ..autograd.grad_mode import no_grad
from ..creation import from_numpy
from ..errors import ArgumentTypeError, DTypeError, ShapeError
from ..nn.module import Module
from ..nn.modules.linear import Linear as FloatLinear
from ..tensor import Tensor
from . import kernels
from .observer import PerChannelMinMaxObserver
from .qtensor import (
    QuantizedTensor,
    per_channel_affine,
    per_channel_symmetric,
    quantize_per_channel,
)
from .traced import capturing, traced_linear_int8

__all__ = ["Linear"]


class Linear(Module):
    """A Linear layer with an int8 weight, computing on int8 activations quantized per call
    (PyTorch's ``torch.ao.nn.quantized.dynamic.Linear``; made by ``quantize_dynamic`` or
    ``Linear.from_float``)."""

    _FLOAT_MODULE = FloatLinear

    def __init__(self, in_features: int, out_features: int, bias_: bool = True, dtype=D.qint8):
        super().__init__()
        for name, v in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"dynamic Linear: {name} must be an int >= 0, got {v!r}")
        if dtype is not D.qint8:
            raise DTypeError(
                f"dynamic Linear: only dtype=gpucore.qint8 weights are supported, got {dtype!r}"
            )
        self.in_features = in_features
        self.out_features = out_features
        self.dtype = dtype
        w = np.zeros((out_features, in_features), np.int8)
        self._set_weight(w, np.ones(out_features), None if not bias_ else np.zeros(out_features))

    def _set_weight(self, w: np.ndarray, scales: np.ndarray, bias) -> None:
        object.__setattr__(self, "_w", from_numpy(np.ascontiguousarray(w, np.int8)))
        object.__setattr__(self, "_scale", from_numpy(np.asarray(scales, np.float64).copy()))
        zp = from_numpy(np.zeros(len(scales), np.int64))
        object.__setattr__(self, "_zero_point", zp)
        b = None if bias is None else from_numpy(np.asarray(bias, np.float32).copy())
        object.__setattr__(self, "_bias", b)
        object.__setattr__(self, "_packed", None)  # (weight version, packed weight)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_float(cls, mod: Module) -> Linear:
        """Quantize a float ``nn.Linear``: its weight per output channel to int8 (symmetric),
        its bias kept in float32."""
        if not isinstance(mod, FloatLinear):
            raise ArgumentTypeError(
                f"dynamic Linear.from_float(): expects a gpucore.nn.Linear, got "
                f"{type(mod).__name__}"
            )
        with no_grad():
            weight = mod.weight.detach().float()
            if weight.is_vulkan:
                weight = weight.to("cpu")
            obs = PerChannelMinMaxObserver(0, dtype=D.qint8, qscheme=per_channel_symmetric)
            obs(weight)
            scales, zero_points = obs.calculate_qparams()
            q = quantize_per_channel(weight, scales, zero_points, 0, D.qint8)
            bias = None if mod.bias is None else mod.bias.detach().float().numpy()
        out = cls(mod.in_features, mod.out_features, mod.bias is not None)
        out._set_weight(q._int.numpy(), scales.numpy().astype(np.float64), bias)
        return out

    def weight(self) -> QuantizedTensor:
        """The weight as a per-channel qint8 QuantizedTensor (axis 0)."""
        return QuantizedTensor(
            self._w, D.qint8, per_channel_affine, self._scale, self._zero_point, 0
        )

    def bias(self) -> Tensor | None:
        """The float32 bias, or None."""
        return self._bias

    # ------------------------------------------------------------------ state
    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False) -> dict:
        """``weight`` (int8), ``weight_scale``, ``weight_zero_point`` and ``bias`` (module
        docstring), as plain tensors."""
        if destination is None:
            destination = {}
        for name, t in (
            ("weight", self._w),
            ("weight_scale", self._scale),
            ("weight_zero_point", self._zero_point),
            ("bias", self._bias),
        ):
            if t is not None:
                destination[prefix + name] = t if keep_vars else t.detach()
        return destination

    def _packed_weight(self) -> kernels.PackedWeight:
        """The packed weight, made again when the weight changed (load_state_dict)."""
        version = self._w._vbox[0]
        cached = self._packed
        if cached is None or cached[0] != version or cached[1] is not self._w:
            cached = (version, self._w, kernels.pack_weight(self._w.numpy()))
            object.__setattr__(self, "_packed", cached)
        return cached[2]

    # ------------------------------------------------------------------ compute
    def forward(self, input: Tensor) -> Tensor:
        """``input @ weight.T + bias`` on int8 values: a float32 tensor of input's shape with
        the last dim out_features, on input's device."""
        if not isinstance(input, Tensor):
            raise ArgumentTypeError(
                f"dynamic quantized Linear: input must be a float Tensor, not "
                f"{type(input).__name__}"
            )
        if not input.dtype.is_floating_point:
            raise DTypeError(
                f"dynamic quantized Linear: input must be a floating point tensor, got "
                f"{input.dtype}"
            )
        if input.dim() == 0 or input.shape[-1] != self.in_features:
            raise ShapeError(
                f"dynamic quantized Linear: input of shape {tuple(input.shape)} does not match "
                f"in_features={self.in_features} (its last dim must be {self.in_features})"
            )
        lead = tuple(input.shape[:-1])
        packed = self._packed_weight()
        bias = None if self._bias is None else self._bias.numpy()
        scales = self._scale.numpy().astype(np.float32)
        x = input.detach().float().reshape(-1, self.in_features)
        if capturing() and x.numel():
            # a capture cannot replay the host's scale / zero point: record them as graph ops
            with no_grad():
                y = traced_linear_int8(x, self._w, scales, bias)
            return y.reshape(*lead, self.out_features)
        with no_grad():
            y = kernels.device_linear_int8(x, packed, scales, bias)
        if y is not None:  # on the Vulkan device (its shader gives the host path's bits)
            return y.reshape(*lead, self.out_features)
        a = np.asarray(x.numpy(), dtype=np.float32)
        q, scale, zero_point = kernels.quantize_activation(a)
        out = kernels.linear_int8(q, scale, zero_point, packed, scales, bias)
        y = from_numpy(out.reshape(*lead, self.out_features))
        return y.to(input.device) if input.is_vulkan else y

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"dtype={self.dtype}, qscheme={per_channel_affine}"
        )

    def __repr__(self) -> str:
        return f"DynamicQuantizedLinear({self.extra_repr()})"

    def __deepcopy__(self, memo):
        # the packed weight may be a C object: the copy packs its own on first use
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            object.__setattr__(new, k, None if k == "_packed" else copy.deepcopy(v, memo))
        return new
