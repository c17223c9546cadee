"""Quantization: QuantizeLinear DequantizeLinear DynamicQuantizeLinear MatMulInteger
QLinearMatMul, for the 8-bit integer types gpucore has (int8, uint8).

Compositions of gpucore ops: quantizing rounds half to even (``unary.round_half_even``) and
saturates to the integer type; integer products are computed in float64 (exact below 2**53) and
converted back.
"""

from __future__ import annotations

from ...dtypes import float32, float64, int32, uint8
from ..proto import GPUCORE_TYPES
from .common import gc, table
from .unary import round_half_even

HANDLERS, handles = table()

_RANGES = {"uint8": (0, 255), "int8": (-128, 127)}


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


def quantize(x, scale, zero_point, dtype):
    """saturate(round_half_even(x / scale) + zero_point) as ``dtype`` (int8 or uint8)."""
    lo, hi = _RANGES[dtype.name]
    q = round_half_even(x.to(float32) / scale.to(float32))
    if zero_point is not None:
        q = q + zero_point.to(float32)
    return q.clamp(float(lo), float(hi)).to(dtype)


@handles("QuantizeLinear")
def quantize_linear(ctx, node, ins):
    """QuantizeLinear(x, y_scale, y_zero_point; axis, output_dtype): to int8 / uint8."""
    ctx.attr("saturate", 1)  # only float8 outputs read it
    ctx.attr("precision", 0)
    x = ctx.tensor(ins[0])
    zp = ins[2] if len(ins) > 2 else None
    out = int(ctx.attr("output_dtype", 0))
    dt = ctx.tensor(zp).dtype if zp is not None else GPUCORE_TYPES.get(out or 2)
    if dt is None or dt.name not in _RANGES:
        raise ctx.unsupported(f"quantizing to {dt.name if dt else out} (int8 / uint8 only)")
    scale = _per_axis(ctx, ins[1], x)
    return quantize(x, scale, None if zp is None else _per_axis(ctx, zp, x), dt)


@handles("DequantizeLinear")
def dequantize_linear(ctx, node, ins):
    """DequantizeLinear(x, x_scale, x_zero_point; axis): (x - zero_point) * scale, in the
    scale's dtype."""
    ctx.attr("output_dtype", 0)  # (the scale's dtype: the only one since opset 23 too)
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
    it mapped onto [0, 255]."""
    x = ctx.tensor(ins[0])
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


@handles("MatMulInteger")
def matmul_integer(ctx, node, ins):
    """MatMulInteger(A, B, a_zero_point, b_zero_point) -> int32."""
    a_zp = ins[2] if len(ins) > 2 else None
    b_zp = ins[3] if len(ins) > 3 else None
    a = _centered(ctx, ins[0], a_zp, -2)
    b = _centered(ctx, ins[1], b_zp, -1)
    return a.matmul(b).to(int32)


@handles("QLinearMatMul")
def qlinear_matmul(ctx, node, ins):
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
