"""Quantization: QuantizeLinear DequantizeLinear DynamicQuantizeLinear MatMulInteger
QLinearMatMul, for the 8-bit integer types gpucore has (int8, uint8).

The int8 path: a QuantizeLinear of a float32 tensor with one (scale, zero point) known at load
time becomes the runtime's ``quantize_linear`` node (ONNX's rounding: ``x / scale`` rounded half
to even, saturated; ``_cpu.quantize_linear_u8``), a DequantizeLinear of such a value its
``dequantize_linear``, and a DequantizeLinear of an int8 initializer with zero points 0 (a
weight) or of an int32 one (a bias) the per-channel ``dequantize_linear`` of the QDQ form: the
runtime's passes (passes/quantize.py) fuse ``DQ -> Conv / Gemm / MatMul -> Q`` into the int8
``qconv2d`` / ``qlinear`` nodes, as for ``gpucore.quantization.quantize_static``. int8
activations travel as their uint8 bit pattern plus 128 (``context.Shifted``: zero point z + 128),
which the uint8 kernels run as they are. (For the CPU, and for device="vulkan" on a device with
shaderFloat64, whose int8 shaders run these nodes: gpucore/onnx/importer.py's int8_nodes; else
everything stays a composition.)

ONNX Runtime's dynamic quantization (``quantize_dynamic``): DynamicQuantizeLinear of a traced
float32 tensor becomes the runtime's ``dynamic_quantize_linear`` (one fused C kernel per output,
runtime/ir/dynamic_quant.py), and a MatMulInteger of its uint8 output with a static int8 weight
``qmatmul_integer`` with the zero point read at run time; ``fuse_dynamic_quantized``
(runtime/passes/quantize.py) then folds the Cast and the Mul by the scales (and a bias Add) into
the GEMM's float32 epilogue, as ONNX Runtime's MatMulIntegerToFloat.

Everything else is a composition of gpucore ops: quantizing rounds half to even
(``unary.round_half_even``) and saturates to the integer type; integer products are computed in
float64 (exact below 2**53) and converted back.
"""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import float32, float64, int32, uint8
from ...runtime.capture.trace import apply_runtime_op
from ...tensor import Tensor
from ..context import Shifted
from ..proto import GPUCORE_TYPES
from .common import gc, table
from .unary import round_half_even

HANDLERS, handles = table()

_RANGES = {
    "uint8": (0, 255),
    "int8": (-128, 127),
    "uint16": (0, 65535),
    "int16": (-32768, 32767),
}


def _per_axis(ctx, v, x):
    """A scale or zero point made to broadcast against ``x``: one value, one per index of
    ``axis`` (1-D), or (block_size > 0) one per block of ``axis``, repeated over the block."""
    t = ctx.tensor(v)
    rank = x.ndim
    block = int(ctx.attr("block_size", 0))
    if block > 0:
        axis = ctx.axis(int(ctx.attr("axis", 1)), rank)
        n = int(x.shape[axis])
        return gc.repeat_interleave(t, block, dim=axis).narrow(axis, 0, n)
    if t.ndim != 1 or rank < 2 or int(t.shape[0]) == 1:
        return t.reshape(()) if t.ndim == 1 and int(t.shape[0]) == 1 else t
    axis = ctx.axis(int(ctx.attr("axis", 1)), rank)
    shape = [1] * rank
    shape[axis] = int(t.shape[0])
    return t.reshape(*shape)


def quantize(x, scale, zero_point, dtype, rounding=round_half_even):
    """saturate(round_half_even(x / scale) + zero_point) as ``dtype`` (int8 or uint8)."""
    lo, hi = _RANGES[dtype.name]
    q = rounding(x.to(float32) / scale.to(float32))
    if zero_point is not None:
        q = q + zero_point.to(float32)
    return q.clamp(float(lo), float(hi)).to(dtype)


def _one(ctx, v, kinds: str):
    """A static value holding one number of a dtype kind in ``kinds`` (else None)."""
    if v is None or not ctx.is_static(v) or v.size != 1 or v.dtype.kind not in kinds:
        return None
    return v.reshape(-1)[0]


def _scale_of(ctx, v):
    """A static float32 scale as a Python float when it is one finite value > 0 (else None)."""
    s = _one(ctx, v, "f")
    if s is None or v.dtype != np.float32 or not (math.isfinite(float(s)) and s > 0):
        return None
    return float(s)


def activation(v):
    """(uint8 tensor, shift) of a traced 8-bit value: a uint8 tensor (0), a Shifted int8 (128);
    else None."""
    if isinstance(v, Shifted):
        return v.u8, 128
    if isinstance(v, Tensor) and v.dtype is uint8:
        return v, 0
    return None


def quantize_value(ctx, x, scale, zp, dt):
    """The runtime's quantize_linear of traced float32 ``x`` with one static (scale, zero
    point) (a Shifted value for int8), or None when the int8 path does not apply."""
    s = _scale_of(ctx, scale)
    z = 0 if zp is None else _one(ctx, zp, "iu")
    if not ctx.int8 or ctx.is_static(x) or x.dtype is not float32 or s is None or z is None:
        return None
    shift = 128 if dt.name == "int8" else 0
    attrs = {"scale": s, "zero_point": int(z) + shift, "onnx": True}
    q = apply_runtime_op("quantize_linear", [x], attrs)
    return Shifted(q) if shift else q


def dequantize_value(ctx, x, scale, zp, axis: int):
    """The runtime's dequantize_linear of ``x`` (None when the int8 path does not apply): of a
    traced 8-bit activation with one static (scale, zero point); of a static int8 (weight) or
    int32 (bias) value with zero points 0 and float32 scales, one or one per index of ``axis``
    (the per-channel form the fusion pass reads)."""
    if not ctx.int8:
        return None
    src = activation(x)
    if src is not None:
        s, z = _scale_of(ctx, scale), 0 if zp is None else _one(ctx, zp, "iu")
        if s is None or z is None:
            return None
        attrs = {"scale": s, "zero_point": int(z) + src[1]}
        return apply_runtime_op("dequantize_linear", [src[0]], attrs)
    if not ctx.is_static(x) or x.dtype not in (np.int8, np.int32) or x.ndim < 1:
        return None
    if not ctx.is_static(scale) or scale.dtype != np.float32 or scale.ndim > 1:
        return None
    if zp is not None and (not ctx.is_static(zp) or np.any(zp != 0)):
        return None
    axis = ctx.axis(axis, x.ndim) if scale.size > 1 else 0  # (one scale: any axis serves)
    n = int(x.shape[axis])
    if scale.size not in (1, n) or not (np.all(np.isfinite(scale)) and np.all(scale > 0)):
        return None
    scales = np.ascontiguousarray(np.broadcast_to(scale.reshape(-1), (n,)), np.float32)
    return apply_runtime_op(
        "dequantize_linear", [ctx.tensor(x), ctx.tensor(scales)], {"axis": axis}
    )


@handles("QuantizeLinear")
def quantize_linear(ctx, node, ins):
    """QuantizeLinear(x, y_scale, y_zero_point; axis, output_dtype): to int8, uint8, int16 or
    uint16."""
    ctx.attr("saturate", 1)  # only float8 outputs read it
    ctx.attr("precision", 0)
    zp = ins[2] if len(ins) > 2 else None
    out = int(ctx.attr("output_dtype", 0))
    dt = ctx.tensor(zp).dtype if zp is not None else GPUCORE_TYPES.get(out or 2)
    if dt is None or dt.name not in _RANGES:
        raise ctx.unsupported(
            f"quantizing to {dt.name if dt else out} (int8, uint8, int16, uint16 only)"
        )
    if int(ctx.attr("block_size", 0)) == 0:
        ctx.attr("axis", 1)
        fast = quantize_value(ctx, ins[0], ins[1], zp, dt)
        if fast is not None:
            return fast
    x = ctx.tensor(ins[0])
    scale = _per_axis(ctx, ins[1], x)
    return quantize(x, scale, None if zp is None else _per_axis(ctx, zp, x), dt)


@handles("DequantizeLinear")
def dequantize_linear(ctx, node, ins):
    """DequantizeLinear(x, x_scale, x_zero_point; axis): (x - zero_point) * scale, in the
    scale's dtype."""
    ctx.attr("output_dtype", 0)  # (the scale's dtype: the only one since opset 23 too)
    zp = ins[2] if len(ins) > 2 and ins[2] is not None else None
    if int(ctx.attr("block_size", 0)) == 0:
        fast = dequantize_value(ctx, ins[0], ins[1], zp, int(ctx.attr("axis", 1)))
        if fast is not None:
            return fast
    x = ctx.tensor(ins[0])
    scale = _per_axis(ctx, ins[1], x)
    zp = ins[2] if len(ins) > 2 and ins[2] is not None else None
    work = x.to(float32)
    if zp is not None:
        work = work - _per_axis(ctx, zp, x).to(float32)
    y = work * scale.to(float32)
    return y.to(scale.dtype) if scale.dtype is not float32 else y


@handles("DynamicQuantizeLinear")
def dynamic_quantize_linear(ctx, node, ins):
    """DynamicQuantizeLinear(x) -> y (uint8), y_scale, y_zero_point: the range of x with 0 in
    it mapped onto [0, 255]. On the CPU the runtime's ``dynamic_quantize_linear`` (one fused
    kernel, cpu/qdynamic.c, or shaders/dynamic_quantize.comp on Vulkan; one node per output);
    else (a Vulkan device without shaderFloat64) a composition."""
    x = ctx.tensor(ins[0])
    if ctx.int8 and x.dtype is float32 and not ctx.is_static(ins[0]):
        return [
            apply_runtime_op("dynamic_quantize_linear", [x], {"output_index": i}) for i in range(3)
        ]
    dims = tuple(range(x.ndim))
    lo = x.amin(dims).clamp(None, 0.0) if x.ndim else x.clamp(None, 0.0)
    hi = x.amax(dims).clamp(0.0, None) if x.ndim else x.clamp(0.0, None)
    scale = (hi - lo) / 255.0
    zp = round_half_even((0.0 - lo) / scale).clamp(0.0, 255.0).to(uint8)
    return [quantize(x, scale, zp, uint8), scale, zp]


def _centered(ctx, v, zp, rank_axis: int):
    """An integer operand minus its zero point (per row of A / column of B), in float64."""
    t = ctx.tensor(v).to(float64)
    if zp is None:
        return t
    z = ctx.tensor(zp).to(float64)
    if z.ndim == 1 and int(z.shape[0]) > 1 and rank_axis == -2:
        z = z.reshape(-1, 1)  # A's zero point per row
    return t - z


def _matmul_integer_int8(ctx, a, b, a_zp, b_zp):
    """MatMulInteger on the int8 GEMM (the runtime's ``qmatmul_integer``) for a traced 8-bit A
    and a static 2-D int8 B with zero points 0 (or a uint8 B with zero points 128, which is
    B - 128: gpucore.onnx.export's form); A's zero point static, or (A uint8) one traced uint8
    value, what DynamicQuantizeLinear gives, read when the node runs; else None."""
    src = activation(a) if ctx.int8 else None
    if src is None or not ctx.is_static(b) or b.ndim != 2 or b.dtype not in (np.int8, np.uint8):
        return None
    if b.dtype == np.uint8:  # uint8 b with zero points 128 (gpucore.onnx.export's form) is b - 128
        if b_zp is None or not ctx.is_static(b_zp) or np.any(np.asarray(b_zp) != 128):
            return None
        b, b_zp = (b.astype(np.int16) - 128).astype(np.int8), None
    if b_zp is not None and (not ctx.is_static(b_zp) or np.any(b_zp != 0)):
        return None
    z = 0 if a_zp is None else _one(ctx, a_zp, "iu")
    w = ctx.tensor(np.ascontiguousarray(b.T))  # [N, K], as the kernel's weights
    if z is not None:
        return apply_runtime_op("qmatmul_integer", [src[0], w], {"a_zero_point": src[1] + int(z)})
    if src[1] or not isinstance(a_zp, Tensor) or a_zp.dtype is not uint8 or a_zp.numel() != 1:
        return None
    return apply_runtime_op("qmatmul_integer", [src[0], w, a_zp], {"a_zero_point": 0})


@handles("MatMulInteger")
def matmul_integer(ctx, node, ins):
    """MatMulInteger(A, B, a_zero_point, b_zero_point) -> int32."""
    a_zp = ins[2] if len(ins) > 2 else None
    b_zp = ins[3] if len(ins) > 3 else None
    fast = _matmul_integer_int8(ctx, ins[0], ins[1], a_zp, b_zp)
    if fast is not None:
        return fast
    a = _centered(ctx, ins[0], a_zp, -2)
    b = _centered(ctx, ins[1], b_zp, -1)
    return a.matmul(b).to(int32)


def qlinear_matmul_exact(ctx, node, ins):
    """QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): the real product of
    the dequantized operands, quantized with y's scale and zero point."""
    a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp = ins[:8]
    prod = _centered(ctx, a, a_zp, -2).matmul(_centered(ctx, b, b_zp, -1))
    scale = ctx.tensor(a_scale).to(float64) * ctx.tensor(b_scale).to(float64)
    real = prod * (scale / ctx.tensor(y_scale).to(float64))
    zp = ctx.tensor(y_zp)
    lo, hi = _RANGES[zp.dtype.name]
    q = round_half_even(real) + zp.to(float64)
    return q.clamp(float(lo), float(hi)).to(zp.dtype)
