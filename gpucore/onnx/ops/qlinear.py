"""The QOperator form: QLinearConv, QLinearMatMul and ONNX Runtime's QGemm (com.microsoft), as
the primitives the runtime fuses (ops/quantize.py): ``DequantizeLinear`` of the activation, of
the int8 weight and of the int32 bias (scale x_scale * w_scale, zero point 0), the float Conv /
MatMul / Gemm, ``QuantizeLinear`` of the result. On the int8 path (a traced 8-bit activation, an
int8 weight initializer with zero points 0, one scale and zero point per activation) the passes
fuse them into one ``qconv2d`` / ``qlinear`` node whose integer sums and requantization are ONNX
Runtime's: ``clamp(round_half_even(float32(sum + bias) * (x_scale * w_scale / y_scale)) + y_zp)``.
Other QLinearMatMul operands take the exact composition of ops/quantize.py; other QLinearConv /
QGemm operands run dequantized in float32 (within one quantization step of the integer result).
ConvInteger of a traced 8-bit input and int8 weights is the runtime's ``qconv2d_integer`` (the int8
convolution's exact int32 sums), as MatMulInteger's ``qmatmul_integer`` (ops/quantize.py); other
operands an exact float64 composition.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import float64, int32
from ...nn import functional as F
from ...runtime.capture.trace import apply_runtime_op
from ...tensor import Tensor
from .common import table
from .nn import conv
from .pool import window
from .quantize import _one, activation, dequantize_value, qlinear_matmul_exact, quantize_value

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


def _conv_integer_int8(ctx, x, w, x_zp, w_zp):
    """ConvInteger on the int8 convolution (the runtime's ``qconv2d_integer``) for a traced
    8-bit 2-D x, a static int8 w with zero points 0 and groups = 1, x's zero point static or one
    traced value (DynamicQuantizeLinear's: the sums are then taken at zero point 0 and
    ``zp * (the weights each output position reads)`` subtracted, exactly, in float64); else
    None."""
    src = activation(x) if ctx.int8 else None
    if src is None or src[0].ndim != 4 or not ctx.is_static(w) or w.dtype != np.int8:
        return None
    if w.ndim != 4 or int(ctx.attr("group", 1)) != 1:
        return None
    if w_zp is not None and (not ctx.is_static(w_zp) or np.any(w_zp != 0)):
        return None
    z = 0 if x_zp is None else _one(ctx, x_zp, "iu")
    traced = z is None and isinstance(x_zp, Tensor) and x_zp.numel() == 1
    if z is None and not traced:
        return None
    size = [int(s) for s in src[0].shape[2:]]
    strides, dilations, amounts = window(ctx, size, [int(k) for k in w.shape[2:]])
    if any(lo != hi for lo, hi in amounts):
        return None
    geo = {"stride": tuple(strides), "padding": tuple(lo for lo, _ in amounts),
           "dilation": tuple(dilations)}  # fmt: skip
    attrs = {"a_zero_point": src[1] + (0 if traced else int(z)), **geo}
    acc = apply_runtime_op("qconv2d_integer", [src[0], ctx.tensor(w)], attrs)
    if not traced:
        return acc
    zp = x_zp.reshape(()).to(float64)
    return (acc.to(float64) - zp * ctx.tensor(_reach(w, size, geo))).to(int32)


def _reach(w: np.ndarray, size: list, geo: dict) -> np.ndarray:
    """[O, oh, ow] float64: the sum of the weights each output position reads from inside the
    input (the padding reads none)."""
    valid = []
    for n, k, s, p, d in zip(size, w.shape[2:], geo["stride"], geo["padding"], geo["dilation"]):
        out = (n + 2 * p - d * (k - 1) - 1) // s + 1
        pos = np.arange(out)[:, None] * s - p + np.arange(k)[None, :] * d
        valid.append(((pos >= 0) & (pos < n)).astype(np.float64))  # [out, k]
    wsum = w.astype(np.float64).sum(axis=1)  # [O, kh, kw]
    return np.ascontiguousarray(np.einsum("okl,ik,jl->oij", wsum, valid[0], valid[1]))


@handles("ConvInteger")
def conv_integer(ctx, node, ins):
    """ConvInteger(x, w, x_zero_point, w_zero_point) -> int32: Conv's attributes. The int8
    convolution where it applies (``_conv_integer_int8``), else the operands minus their zero
    points (w's per output channel) convolved in float64 (exact below 2**53; the padding is the
    zero point, 0 once centered)."""
    x_zp = ins[2] if len(ins) > 2 else None
    w_zp = ins[3] if len(ins) > 3 else None
    fast = _conv_integer_int8(ctx, ins[0], ins[1], x_zp, w_zp)
    if fast is not None:
        return fast
    x, w = ctx.tensor(ins[0]).to(float64), ctx.tensor(ins[1]).to(float64)
    if x_zp is not None:
        x = x - ctx.tensor(x_zp).to(float64).reshape(())
    if w_zp is not None:
        wz = ctx.tensor(w_zp).to(float64)
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
