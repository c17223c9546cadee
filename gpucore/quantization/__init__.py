"""INT8 quantization with PyTorch's names (``torch.ao.quantization``).

- quantized tensors (``qtensor``): ``gpucore.quantize_per_tensor``,
  ``gpucore.quantize_per_channel``, ``QuantizedTensor``, the dtypes ``gpucore.qint8``,
  ``gpucore.quint8``, ``gpucore.qint32`` and the schemes ``gpucore.per_tensor_affine`` ...;
- observers (``observer``, ``histogram``): MinMaxObserver, MovingAverageMinMaxObserver,
  PerChannelMinMaxObserver, MovingAveragePerChannelMinMaxObserver, HistogramObserver;
- fake quantization (``fake_quantize``): ``fake_quantize_per_tensor_affine``,
  ``fake_quantize_per_channel_affine`` (straight-through gradients) and the ``FakeQuantize`` module
  for quantization-aware training;
- dynamic quantization (``dynamic``): ``quantize_dynamic(model, {nn.Linear})`` replaces Linear
  layers with ``dynamic.Linear`` (int8 weights per output channel, activations quantized per call,
  int32 accumulation through ``kernels.linear_int8``; under a capture, ``gpucore.compile``'s,
  the same arithmetic as graph ops: ``traced``); ``nn.LSTM`` / ``nn.GRU`` become
  ``dynamic_rnn.LSTM`` / ``GRU`` (int8 W_ih and W_hh, float32 gates);
- static quantization (``static``): ``quantize_static(compiled_model, calibration_batches)``
  calibrates a ``gpucore.compile`` result with observers and returns an int8 CompiledModel
  (QDQ insertion and QGEMM / QConv fusion in gpucore/runtime/passes/quantize.py).

``gpucore.ao.quantization`` is this package under PyTorch's path.
"""

import sys
import types

from ..dtypes import qint8, qint32, quint8
from . import dynamic, dynamic_rnn, kernels
from .fake_quantize import (
    FakeQuantize,
    FakeQuantizeBase,
    default_fake_quant,
    default_per_channel_weight_fake_quant,
    default_weight_fake_quant,
    fake_quantize_per_channel_affine,
    fake_quantize_per_tensor_affine,
)
from .histogram import HistogramObserver
from .observer import (
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    ObserverBase,
    PerChannelMinMaxObserver,
    UniformQuantizationObserverBase,
)
from .qtensor import (
    QuantizedTensor,
    dequantize,
    per_channel_affine,
    per_channel_symmetric,
    per_tensor_affine,
    per_tensor_symmetric,
    qscheme,
    quantize_per_channel,
    quantize_per_tensor,
)
from .quantize import DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS, quantize_dynamic
from .static import calibrate, quantize_static

__all__ = [
    "qint8",
    "quint8",
    "qint32",
    "QuantizedTensor",
    "dequantize",
    "qscheme",
    "per_tensor_affine",
    "per_channel_affine",
    "per_tensor_symmetric",
    "per_channel_symmetric",
    "quantize_per_tensor",
    "quantize_per_channel",
    "ObserverBase",
    "UniformQuantizationObserverBase",
    "MinMaxObserver",
    "MovingAverageMinMaxObserver",
    "PerChannelMinMaxObserver",
    "MovingAveragePerChannelMinMaxObserver",
    "HistogramObserver",
    "fake_quantize_per_tensor_affine",
    "fake_quantize_per_channel_affine",
    "FakeQuantizeBase",
    "FakeQuantize",
    "default_fake_quant",
    "default_weight_fake_quant",
    "default_per_channel_weight_fake_quant",
    "quantize_dynamic",
    "DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS",
    "quantize_static",
    "calibrate",
    "dynamic",
    "dynamic_rnn",
    "kernels",
    "ao_module",
]


def ao_module() -> types.ModuleType:
    """``gpucore.ao``: PyTorch's path, whose ``quantization`` is this package. Registered in
    ``sys.modules`` on first use, so ``import gpucore.ao.quantization`` works after ``gpucore.ao``
    was touched (``gpucore.ao.quantization.quantize_dynamic`` always works)."""
    mod = sys.modules.get("gpucore.ao")
    if mod is None:
        mod = types.ModuleType("gpucore.ao", "PyTorch's path: gpucore.ao.quantization.")
        mod.quantization = sys.modules[__name__]
        # gpucore.ao.nn.quantized.dynamic.Linear, as torch.ao.nn.quantized.dynamic.Linear
        mod.nn = types.ModuleType("gpucore.ao.nn")
        mod.nn.quantized = types.ModuleType("gpucore.ao.nn.quantized")
        mod.nn.quantized.dynamic = dynamic
        for name, m in (
            ("gpucore.ao", mod),
            ("gpucore.ao.quantization", mod.quantization),
            ("gpucore.ao.nn", mod.nn),
            ("gpucore.ao.nn.quantized", mod.nn.quantized),
            ("gpucore.ao.nn.quantized.dynamic", dynamic),
        ):
            sys.modules.setdefault(name, m)
    return mod
