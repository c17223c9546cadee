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

``quantize_activation`` picks the dynamic per-call parameters of an activation (uint8, affine,
per tensor, from its min and max: MinMaxObserver's formula, ONNX's DynamicQuantizeLinear) and
quantizes it (the product and the sum rounded to float32 each, the faster of PyTorch's two
roundings).
"""

from __future__ import annotations

import numpy as np

from .. import _cpu
from .. import dtypes as D
from .qtensor import quantize_array

__all__ = ["has_qgemm", "PackedWeight", "pack_weight", "linear_int8", "quantize_activation"]

_EPS = np.float32(np.finfo(np.float32).eps)
MAX_K = 65536  # the C kernel's limit on the reduction length (int32 sums); longer: the reference


def has_qgemm() -> bool:
    """Whether this build of the C extension has the INT8 GEMM (else the numpy reference runs)."""
    return hasattr(_cpu, "qgemm") and hasattr(_cpu, "qgemm_pack")


def quantize_activation(x: np.ndarray) -> tuple[np.ndarray, float, int]:
    """(uint8 values, scale, zero_point) of float32 ``x`` quantized per tensor over [0, 255]
    with ``scale = (max(x, 0) - min(x, 0)) / 255`` (at least float32 eps) and
    ``zero_point = clamp(-round(min(x, 0) / scale), 0, 255)``."""
    if x.size:
        lo = np.minimum(x.min(), np.float32(0))
        hi = np.maximum(x.max(), np.float32(0))
    else:
        lo = hi = np.float32(0)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(
            "quantized linear: the input holds inf or NaN, which dynamic quantization cannot "
            "represent; check the model's activations (the float model would propagate them)"
        )
    scale = np.maximum((hi - lo) / np.float32(255), _EPS)
    zero_point = int(np.clip(-np.rint(lo / scale), 0, 255))
    q = quantize_array(x, float(scale), zero_point, D.quint8)  # rounded as quantize_per_channel
    return q, float(scale), zero_point


class PackedWeight:
    """An int8 weight [M, K] ready for ``linear_int8``: the C kernel's panels (``native``, when
    this build has the kernel) and, once the reference path has run, a float64 copy [K, M]."""

    __slots__ = ("w", "native", "_w64t")

    def __init__(self, w: np.ndarray, native: bool = True):
        self.w = np.ascontiguousarray(w, dtype=np.int8)
        use = native and has_qgemm() and self.w.shape[1] <= MAX_K
        # w is [n, k] (nn.Linear's layout): trans=1
        self.native = _cpu.qgemm_pack(self.w, self.w.shape[1], self.w.shape[0], 1) if use else None
        self._w64t = None

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
    usable = bool(np.all(np.isfinite(mult) & (mult > 0))) and (b is None or np.isfinite(b).all())
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
