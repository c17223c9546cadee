"""The dynamic quantized Linear as graph ops, for a capture (``gpucore.compile``, the runtime).

Eager, ``dynamic.Linear`` computes its activations' scale and zero point on the host from the
input's values; a capture cannot replay a host read (runtime/capture/trace.py refuses it), so
under a capture the layer records the same arithmetic as tensor ops instead, each one the
float32 operation ``kernels.quantize_activation`` makes, in its order:

    lo = min(min x, 0), hi = max(max x, 0)                       (float32)
    scale = max((hi - lo) / 255, eps)                              (float32 eps)
    zp = clamp(-round_half_even(lo / scale), 0, 255)
    q = clamp(round_half_even(x * (1 / scale) + zp), 0, 255)      (``_cpu.quantize_u8``)

and the product as one ``qlinear_dynamic`` node (runtime/ir/dynamic_quant.py): the int8 GEMM
with ``linear_int8``'s float32 epilogue ``float32(sum (q - zp) * w) * (scale * w_scales[j]) +
bias[j]``. So the compiled model gives the eager layer's outputs bit for bit on every input.
The CPU pipeline then fuses the whole pattern into one float-input ``qlinear_dynamic``
(runtime/passes/dynamic_linear.py: the quantization in C, the same float32 operations) and a
following ReLU into its epilogue; ``gpucore.onnx.export`` writes that node as ONNX Runtime's
dynamic quantization. One difference: eager raises ValueError on an input holding inf or NaN,
or finite values whose range max - min overflows float32 (dynamic quantization has no finite
scale for them); the graph cannot raise, and gives NaN there
(compile with ``check_nan=True`` to refuse NaN inputs).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..creation import from_numpy, tensor
from ..ops import registry
from ..tensor import Tensor

_EPS = float(np.finfo(np.float32).eps)


def capturing() -> bool:
    """Whether this thread's ops are being recorded by a runtime capture."""
    return registry.capturing() is not None


def _f32(v: float) -> Tensor:
    return tensor(np.float32(v), dtype=D.float32)


def quantize_activation_ops(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(uint8 q, float32 scale, uint8 zero point) of float32 ``x`` [M, K] (M*K > 0), computed
    with tensor ops as ``kernels.quantize_activation`` computes them (module docstring)."""
    zero = _f32(0.0)
    lo = x.amin().minimum(zero)
    hi = x.amax().maximum(zero)
    scale = ((hi - lo) / _f32(255.0)).maximum(_f32(_EPS))
    zp = (lo / scale).round().neg().clamp(0.0, 255.0)
    inv = _f32(1.0) / scale
    q = (x * inv + zp).round().clamp(0.0, 255.0)
    return q.to(D.uint8), scale, zp.to(D.uint8)


def traced_linear_int8(x: Tensor, w: Tensor, w_scales: np.ndarray, bias) -> Tensor:
    """float32 [M, N] of ``dynamic.Linear`` on float32 ``x`` [M, K] (M*K > 0) with the int8
    weight ``w`` [N, K], float32 ``w_scales`` [N] and float32 ``bias`` [N] or None, recorded
    as graph ops (module docstring)."""
    from ..runtime.capture.trace import apply_runtime_op  # noqa: PLC0415 - runtime imports nn

    q, scale, zp = quantize_activation_ops(x)
    ws = from_numpy(np.ascontiguousarray(w_scales, np.float32))
    inputs = [q, w, scale, zp, ws]
    if bias is not None:
        inputs.append(from_numpy(np.ascontiguousarray(bias, np.float32)))
    return apply_runtime_op("qlinear_dynamic", inputs, {})
