"""The QOperator form: QLinearConv, QLinearMatMul and ONNX Runtime's QGemm (com.microsoft), as
the primitives the runtime fuses (ops/quantize.py): ``DequantizeLinear`` of the activation, of
the int8 weight and of the int32 bias (scale x_scale * w_scale, zero point 0), the float Conv /
MatMul / Gemm, ``QuantizeLinear`` of the result. On the int8 path (a traced 8-bit activation, an
int8 weight initializer with zero points 0, one scale and zero point per activation) the passes
fuse them into one ``qconv2d`` / ``qlinear`` node whose integer sums and requantization are ONNX
Runtime's: ``clamp(round_half_even(float32(sum + bias) * (x_scale * w_scale / y_scale)) + y_zp)``.
Other QLinearMatMul operands take the exact composition of ops/quantize.py; other QLinearConv /
QGemm operands run dequantized in float32 (within one quantization step of the integer result).
ConvInteger is an exact float64 composition, as MatMulInteger (ops/quantize.py).
"""

from __future__ import annotations

import numpy as np

from ...dtypes import float64, int32
from ...nn import functional as F
from .common import table
from .nn import conv
from .quantize import dequantize_value, qlinear_matmul_exact, quantize_value

HANDLERS, handles = table()


def _dq(ctx, v, scale, zp, axis: int):
    """``v`` dequantized: the runtime's node where the int8 path applies, else the float32
    composition (DequantizeLinear's handler)."""
    fast = dequantize_value(ctx, v, scale, zp, axis)
    if fast is not None:
        return fast
    from .quantize import HANDLERS as Q  # noqa: PLC0415

    ins = [v, scale] + ([zp] if zp is not None else [])
    saved = ctx.node.attrs
    try:  # DequantizeLinear reads axis (per-axis scales) and block_size from the node
        ctx.node.attrs = {"axis": axis}
        return Q["DequantizeLinear"](ctx, ctx.node, ins)
    finally:
        ctx.node.attrs = saved


def _q(ctx, y, scale, zp):
    """``y`` quantized with (scale, zero point), the zero point's dtype."""
    dt = ctx.tensor(zp).dtype
    fast = quantize_value(ctx, y, scale, zp, dt)
    if fast is not None:
        return fast
    from .quantize import _per_axis, quantize  # noqa: PLC0415

    return quantize(ctx.tensor(y), _per_axis(ctx, scale, y), _per_axis(ctx, zp, y), dt)


def _bias_scale(x_scale, w_scale) -> np.ndarray:
    """The int32 bias's scale: x_scale * w_scale in float32 (one per output channel)."""
    return (
        np.float32(np.asarray(x_scale).reshape(-1)[0]) * np.asarray(w_scale, np.float32)
    ).astype(np.float32)


@handles("QLinearConv")
def qlinear_conv(ctx, node, ins):
    """QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B]): Conv's attributes."""
    x, xs, xz, w, ws, wz, ys, yz = ins[:8]
    b = ins[8] if len(ins) > 8 else None
    xf = _dq(ctx, x, xs, xz, 1)
    wf = _dq(ctx, w, ws, wz, 0)
    bf = None
    if b is not None:
        bf = _dq(ctx, ctx.static(b, "B"), _bias_scale(ctx.static(xs, "x_scale"), ws), None, 0)
    return _q(ctx, conv(ctx, node, [xf, wf, bf]), ys, yz)


@handles("QLinearMatMul")
def qlinear_matmul(ctx, node, ins):
    """QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): the int8 path for a
    traced activation and a static 2-D int8 b (scales per column); else the exact composition."""
    a, a_s, a_z, b, b_s, b_z, y_s, y_z = ins[:8]
    af = dequantize_value(ctx, a, a_s, a_z, 0)
    bf = dequantize_value(ctx, b, b_s, b_z, -1) if ctx.is_static(b) and b.ndim == 2 else None
    if af is None or bf is None or af.ndim < 2:
        return qlinear_matmul_exact(ctx, node, ins)
    out = _q(ctx, af.matmul(bf), y_s, y_z)
    return out


@handles("ConvInteger")
def conv_integer(ctx, node, ins):
    """ConvInteger(x, w, x_zero_point, w_zero_point) -> int32: Conv's attributes, the operands
    minus their zero points (w's per output channel) convolved in float64 (exact below 2**53;
    the padding is the zero point, 0 once centered)."""
    x, w = ctx.tensor(ins[0]).to(float64), ctx.tensor(ins[1]).to(float64)
    if len(ins) > 2 and ins[2] is not None:
        x = x - ctx.tensor(ins[2]).to(float64).reshape(())
    if len(ins) > 3 and ins[3] is not None:
        wz = ctx.tensor(ins[3]).to(float64)
        w = w - (wz.reshape(-1, *([1] * (w.ndim - 1))) if wz.numel() > 1 else wz.reshape(()))
    return conv(ctx, node, [x, w, None]).to(int32)


def qgemm(ctx, node, ins):
    """QGemm (com.microsoft; ONNX Runtime's QOperator Gemm): A, a_scale, a_zp, B, b_scale, b_zp,
    C (int32, scale a_scale * b_scale), y_scale, y_zp; float32 out without y_scale. alpha,
    transA, transB."""
    a, a_s, a_z, b, b_s, b_z = ins[:6]
    c = ins[6] if len(ins) > 6 else None
    y_s = ins[7] if len(ins) > 7 else None
    y_z = ins[8] if len(ins) > 8 else None
    alpha = float(ctx.attr("alpha"))
    trans_a, trans_b = bool(ctx.attr("transA")), bool(ctx.attr("transB"))
    af = _dq(ctx, a, a_s, a_z, 1)
    bf = _dq(ctx, b, b_s, b_z, 0 if trans_b else 1)
    af = af.transpose(0, 1) if trans_a else af
    n = int(bf.shape[0] if trans_b else bf.shape[1])
    cf = None
    if c is not None:
        c = ctx.static(c, "C")
        if c.shape not in ((n,), (1, n)):
            raise ctx.unsupported(f"QGemm with C of shape {list(c.shape)} (only [{n}])")
        cf = _dq(ctx, c.reshape(n), _bias_scale(ctx.static(a_s, "a_scale"), b_s), None, 0)
    if trans_b and alpha == 1.0:
        y = F.linear(af, bf, cf)
    else:
        y = af.matmul(bf.transpose(0, 1) if trans_b else bf)
        y = y * alpha if alpha != 1.0 else y
        y = y + cf if cf is not None else y
    return y if y_s is None else _q(ctx, y, y_s, y_z)
