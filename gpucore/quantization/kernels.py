"""The integer kernels quantized layers call, behind one small interface.

``linear_int8`` is the only place a quantized layer reaches a kernel: the C extension's INT8 GEMM
(``_cpu.qgemm``, cpu/qgemm.c, on weights packed once by ``_cpu.qgemm_pack``) when this build has
it, else an exact numpy reference. Both compute, bit for bit alike

    acc[i, j] = sum_k (a[i, k] - a_zero_point) * w[j, k]           exact int32
    out[i, j] = fl32(fl32(float(acc[i, j]) * m[j]) + bias[j])      m[j] = fl32(a_scale * w_scale[j])

(``a``: uint8 activations [N, K]; ``w``: int8 weights [M, K], symmetric, one scale per output
channel; no fused multiply-add in the epilogue), then ``max(out, 0)`` with ``relu``. The
reference runs the integer product as a float64 GEMM, exact because every partial sum is an
integer far below 2**53.

On the Vulkan device, ``device_linear_int8`` runs the same computation with the shaders of
backends/vulkan/kernels/qgemm.py (the activation quantized there too, its min and max from the
device's reductions), giving the same bits; it takes the place of the host path where the float
Linear of the same shapes would run on the device (dispatch.py's policy).

``quantize_activation`` picks the dynamic per-call parameters of an activation (uint8, affine,
per tensor, from its min and max: MinMaxObserver's formula, ONNX's DynamicQuantizeLinear) and
quantizes it (the product and the sum rounded to float32 each, the faster of PyTorch's two
roundings).
"""

from __future__ import annotations

import numpy as np

from .. import _cpu, dispatch
from .. import dtypes as D
from ..ops.linalg import LINEAR
from ..tensor import Tensor
from .qtensor import quantize_array

__all__ = [
    "has_qgemm",
    "PackedWeight",
    "pack_weight",
    "linear_int8",
    "device_linear_int8",
    "quantize_activation",
    "activation_qparams",
]

_EPS = np.float32(np.finfo(np.float32).eps)
MAX_K = 65536  # the C kernel's limit on the reduction length (int32 sums); longer: the reference


def has_qgemm() -> bool:
    """Whether this build of the C extension has the INT8 GEMM (else the numpy reference runs)."""
    return hasattr(_cpu, "qgemm") and hasattr(_cpu, "qgemm_pack")


def quantize_activation(x: np.ndarray) -> tuple[np.ndarray, float, int]:
    """(uint8 values, scale, zero_point) of float32 ``x`` quantized per tensor over [0, 255]
    with ``scale = (max(x, 0) - min(x, 0)) / 255`` (at least float32 eps) and
    ``zero_point = clamp(-round(min(x, 0) / scale), 0, 255)``."""
    scale, zero_point = activation_qparams(x.min(), x.max()) if x.size else (float(_EPS), 0)
    if hasattr(_cpu, "quantize_u8") and x.dtype == np.float32 and x.flags.c_contiguous:
        # one C pass with quantize_array's float32 operations (the same bits)
        q = np.empty(x.shape, np.uint8)
        _cpu.quantize_u8(x.reshape(-1), q.reshape(-1), x.size, scale, zero_point)
        return q, scale, zero_point
    q = quantize_array(x, scale, zero_point, D.quint8)  # rounded as quantize_per_channel
    return q, scale, zero_point


def activation_qparams(x_min, x_max) -> tuple[float, int]:
    """(scale, zero_point) of ``quantize_activation`` from the activation's min and max."""
    lo = np.minimum(np.float32(x_min), np.float32(0))
    hi = np.maximum(np.float32(x_max), np.float32(0))
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(
            "quantized linear: the input holds inf or NaN, which dynamic quantization cannot "
            "represent; check the model's activations (the float model would propagate them)"
        )
    with np.errstate(over="ignore"):
        span = hi - lo
    if not np.isfinite(span):
        raise ValueError(
            f"quantized linear: the input's range [{lo}, {hi}] overflows float32 (max - min is "
            "inf), so dynamic quantization has no finite scale; rescale the input"
        )
    scale = np.maximum(span / np.float32(255), _EPS)
    zero_point = int(np.clip(-np.rint(lo / scale), 0, 255))
    return float(scale), zero_point


class PackedWeight:
    """An int8 weight [M, K] ready for ``linear_int8``: the C kernel's panels (``native``, when
    this build has the kernel) and, once the reference path has run, a float64 copy [K, M]."""

    __slots__ = ("w", "native", "_w64t", "_device")

    def __init__(self, w: np.ndarray, native: bool = True):
        self.w = np.ascontiguousarray(w, dtype=np.int8)
        use = native and has_qgemm() and self.w.shape[1] <= MAX_K
        # w is [n, k] (nn.Linear's layout): trans=1
        self.native = _cpu.qgemm_pack(self.w, self.w.shape[1], self.w.shape[0], 1) if use else None
        self._w64t = None
        self._device = None  # (backend, its QWeight) once a device call ran

    def on_device(self, be):
        """The weight packed on Vulkan backend ``be`` (kernels/qgemm.py's QWeight, made once)."""
        if self._device is None or self._device[0] is not be:
            from ..backends.vulkan.kernels import qgemm  # the device's modules load with it

            self._device = (be, qgemm.pack_weight(be, self.w))
        return self._device[1]

    def reference(self) -> np.ndarray:
        """The weight as float64 [K, M] (made once)."""
        if self._w64t is None:
            self._w64t = np.ascontiguousarray(self.w.T, dtype=np.float64)
        return self._w64t


def pack_weight(w: np.ndarray, native: bool = True) -> PackedWeight:
    """Pack int8 weights [M, K] once for every later ``linear_int8`` call; ``native=False``
    keeps to the numpy reference."""
    return PackedWeight(w, native)


def linear_int8(
    a: np.ndarray,
    a_scale: float,
    a_zero_point: int,
    packed: PackedWeight,
    w_scale: np.ndarray,
    bias: np.ndarray | None = None,
    relu: bool = False,
) -> np.ndarray:
    """float32 [N, M] = dequantized (uint8 ``a`` [N, K]) @ dequantized (int8 weight [M, K]).T
    + ``bias`` (module docstring). ``packed``: ``pack_weight(w)``; ``w_scale``: float32 [M]."""
    n, m = a.shape[0], packed.w.shape[0]
    w_scale = np.ascontiguousarray(w_scale, dtype=np.float32)
    mult = np.float32(a_scale) * w_scale
    b = None if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
    # the C kernel refuses multipliers that underflow or overflow float32 and non-finite biases;
    # the reference computes those cases the same way
    usable = _usable(mult, b)
    if packed.native is not None and usable:
        out = np.empty((n, m), np.float32)
        a = np.ascontiguousarray(a, dtype=np.uint8)
        args = (float(a_scale), int(a_zero_point), w_scale, b, bool(relu), 1.0, 0)
        _cpu.qgemm(a, packed.native, out, n, *args)
        return out
    return reference_linear_int8(a, a_zero_point, packed.reference(), mult, b, relu)


def reference_linear_int8(a, a_zero_point, w64t, mult, bias, relu: bool) -> np.ndarray:
    """The exact numpy path of ``linear_int8`` (``w64t``: the weight as float64 [K, M],
    ``mult``: the float32 multipliers m[j])."""
    acc = (a.astype(np.float64) - float(a_zero_point)) @ w64t
    out = acc.astype(np.float32) * mult
    if bias is not None:
        out = out + np.asarray(bias, dtype=np.float32)
    if relu:
        out = np.maximum(out, np.float32(0))
    return np.asarray(out, dtype=np.float32)


def device_linear_int8(
    x: Tensor,
    packed: PackedWeight,
    w_scale: np.ndarray,
    bias: np.ndarray | None = None,
    relu: bool = False,
) -> Tensor | None:
    """``linear_int8`` of float32 Tensor ``x`` [N, K] (quantized per call as
    ``quantize_activation``) on the Vulkan device, as a float32 device Tensor [N, M] with the
    same bits; None where it runs on the host instead: the float Linear of these shapes would
    (dispatch policy: the device, a small op, no device), the multipliers are unusable (the
    reference handles them) or K exceeds the kernel's limit."""
    n, k = x.shape
    m = packed.w.shape[0]
    specs = [((n, m), D.float32), ((m, k), D.float32)]
    be = dispatch.backend_for(LINEAR, (x,), specs)
    w_scale = np.ascontiguousarray(w_scale, dtype=np.float32)
    b = None if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
    if be is dispatch.CPU or k > MAX_K or not _usable(w_scale, b):
        return None
    from ..backends.vulkan.kernels import qgemm  # the device's modules load with the device

    if x.numel():
        # the min and max from the device's reductions (the same values as numpy's)
        scale, zero_point = activation_qparams(x.min().item(), x.max().item())
    else:
        scale, zero_point = float(_EPS), 0
    if not _usable(np.float32(scale) * w_scale, b):
        return None
    dispatch.record("quantized_linear", be.name, (n, m))
    inv = np.float32(1) / np.float32(scale)
    a = qgemm.quantize_rows(be, be.to_device(x), float(inv), zero_point)[:, :k]
    out = be.empty_array((n, m), np.float32)
    qgemm.qgemm(be, a, packed.on_device(be), out, scale, zero_point, w_scale, b, bool(relu))
    return Tensor._wrap(out, D.float32, dev=be)


def _usable(mult: np.ndarray, b) -> bool:
    return bool(np.all(np.isfinite(mult) & (mult > 0))) and (b is None or np.isfinite(b).all())
