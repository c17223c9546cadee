"""ONNX Runtime's ``com.microsoft`` contrib ops that its QOperator quantizer writes
(``quantize_static(..., quant_format=QuantFormat.QOperator)``): QGemm (ops/qlinear.py) and the
8-bit forms of elementwise ops, pools, Concat and Softmax below.

Each is what ONNX Runtime's own kernels approximate: the operands dequantized
(``scale * (q - zero_point)``), the float op, the result quantized (round half to even,
saturated). On the int8 path the dequantize / quantize steps are the runtime's int8 nodes
(ops/qlinear.py's ``_dq`` / ``_q``); ONNX Runtime computes some of these ops with lookup tables
or fixed-point ratios instead, which may round one quantization step apart.

Attributes as the contrib-op schemas: QLinearLeakyRelu ``alpha``; the pools ``channels_last``
(NHWC input and output) and AveragePool's window attributes; QLinearConcat ``axis``;
QLinearSoftmax ``axis`` and ``opset`` (the Softmax semantics it replaced: before 13, over the
input flattened to 2-D at ``axis``).
"""

from __future__ import annotations

import math

import numpy as np

from ...nn import functional as F
from .common import gc
from .pool import average_pool
from .qlinear import _dq, _q, qgemm


def _zero_point(ctx, zp, like):
    """``zp``, or a zero of ``like``'s 8-bit type when the optional input is absent (the
    contrib schemas' default)."""
    if zp is not None:
        return zp
    return np.zeros((), ctx.tensor(like).dtype.np)


def _in(ctx, ins: list, i: int):
    """``(x, scale, zero point)`` of the quantized operand starting at input ``i``, dequantized."""
    zp = ins[i + 2] if len(ins) > i + 2 else None
    return _dq(ctx, ins[i], ins[i + 1], zp, 1)


def _out(ctx, y, ins: list, i: int, like):
    """``y`` quantized with the output (scale, zero point) at inputs ``i`` and ``i + 1``."""
    zp = ins[i + 1] if len(ins) > i + 1 else None
    return _q(ctx, y, ins[i], _zero_point(ctx, zp, like))


def _nchw(ctx, x):
    """x with channels moved from last to second (``channels_last=1``), else as it is."""
    if not int(ctx.attr("channels_last")) or x.ndim < 3:
        return x, False
    return x.permute(0, x.ndim - 1, *range(1, x.ndim - 1)), True


def _back(y, moved: bool):
    return y.permute(0, *range(2, y.ndim), 1) if moved else y


def qlinear_binary(ctx, node, ins):
    """QLinearAdd / QLinearMul(A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp): broadcasting."""
    a, b = _in(ctx, ins, 0), _in(ctx, ins, 3)
    ctx.broadcast(a.shape, b.shape)
    y = gc.add(a, b) if node.op_type == "QLinearAdd" else gc.mul(a, b)
    return _out(ctx, y, ins, 6, ins[0])


def qlinear_unary(ctx, node, ins):
    """QLinearSigmoid / QLinearLeakyRelu(alpha)(X, X_scale, X_zp, Y_scale, Y_zp)."""
    x = _in(ctx, ins, 0)
    if node.op_type == "QLinearSigmoid":
        y = gc.sigmoid(x)
    else:
        y = F.leaky_relu(x, float(ctx.attr("alpha")))
    return _out(ctx, y, ins, 3, ins[0])


def qlinear_global_average_pool(ctx, node, ins):
    """QLinearGlobalAveragePool(channels_last)(X, x_scale, x_zp, y_scale, y_zp): the mean over
    every spatial dim, kept as size 1."""
    x, moved = _nchw(ctx, _in(ctx, ins, 0))
    dims = tuple(range(2, x.ndim))
    y = x.mean(dim=dims, keepdim=True) if dims else x
    return _out(ctx, _back(y, moved), ins, 3, ins[0])


def qlinear_average_pool(ctx, node, ins):
    """QLinearAveragePool(channels_last, AveragePool's attributes)(X, x_scale, x_zp, y_scale,
    y_zp)."""
    x, moved = _nchw(ctx, _in(ctx, ins, 0))
    (y,) = average_pool(ctx, node, [x])
    return _out(ctx, _back(y, moved), ins, 3, ins[0])


def qlinear_concat(ctx, node, ins):
    """QLinearConcat(axis)(Y_scale, Y_zp, then (X, X_scale, X_zp) per input): each input
    requantized to Y's scale and zero point."""
    if len(ins) < 5 or (len(ins) - 2) % 3:
        raise ctx.invalid(f"needs Y_scale, Y_zero_point and triples of inputs, got {len(ins)}")
    vals = [_in(ctx, ins, i) for i in range(2, len(ins), 3)]
    axis = ctx.axis(int(ctx.attr("axis")), vals[0].ndim)
    for v in vals[1:]:
        a, b = [int(s) for s in vals[0].shape], [int(s) for s in v.shape]
        if len(a) != len(b) or a[:axis] + a[axis + 1 :] != b[:axis] + b[axis + 1 :]:
            raise ctx.invalid(f"cannot concatenate shapes {a} and {b} on axis {axis}")
    return _out(ctx, gc.cat(vals, axis), ins, 0, ins[2])


def qlinear_softmax(ctx, node, ins):
    """QLinearSoftmax(axis, opset)(X, X_scale, x_zp, y_scale, y_zp)."""
    x = _in(ctx, ins, 0)
    if x.ndim == 0:
        raise ctx.invalid("QLinearSoftmax of a 0-D input")
    axis = ctx.axis(int(ctx.attr("axis")), x.ndim)
    if int(ctx.attr("opset")) >= 13 or axis == x.ndim - 1:
        y = F.softmax(x, dim=axis)
    else:
        dims = [int(s) for s in x.shape]
        y = F.softmax(x.reshape(math.prod(dims[:axis]), math.prod(dims[axis:])), dim=1)
        y = y.reshape(*dims)
    return _out(ctx, y, ins, 3, ins[0])


_POOL = {"auto_pad": "NOTSET", "ceil_mode": 0, "channels_last": 0, "count_include_pad": 0}

# com.microsoft ops: (handler, attribute defaults, (fewest, most) inputs, the inputs that may
# not be left empty), as ONNX Runtime's contrib schemas take them (optional zero points may be
# left out or empty); Context.run looks them up by op type and refuses other inputs by node
# before the handler reads them
_MANY = 2**31 - 1
MS_HANDLERS = {
    "QGemm": (qgemm, {"alpha": 1.0, "transA": 0, "transB": 0}, (6, 9), (0, 1, 3, 4)),
    "QLinearAdd": (qlinear_binary, {}, (7, 8), (0, 1, 3, 4, 6)),
    "QLinearMul": (qlinear_binary, {}, (7, 8), (0, 1, 3, 4, 6)),
    "QLinearSigmoid": (qlinear_unary, {}, (4, 5), (0, 1, 3)),
    "QLinearLeakyRelu": (qlinear_unary, {"alpha": 0.01}, (4, 5), (0, 1, 3)),
    "QLinearGlobalAveragePool": (
        qlinear_global_average_pool,
        {"channels_last": 0},
        (5, 5),
        (0, 1, 2, 3, 4),
    ),
    "QLinearAveragePool": (qlinear_average_pool, _POOL, (4, 5), (0, 1, 3)),
    "QLinearConcat": (qlinear_concat, {}, (5, _MANY), (0, 1)),
    "QLinearSoftmax": (qlinear_softmax, {"axis": -1}, (5, 5), (0, 1, 3, 4)),
}
