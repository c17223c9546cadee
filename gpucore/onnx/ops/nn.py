"""Conv, BatchNormalization, LayerNormalization, InstanceNormalization, RMSNormalization,
Softmax, LogSoftmax.

Inference-mode batch norm with static statistics becomes one per-channel multiply-add (the
runtime folds it into the convolution before it); layer norm is gpucore's composition, which
the runtime fuses into one ``layer_norm`` node.
"""

from __future__ import annotations

import math

import numpy as np

from ...nn import functional as F
from .common import table
from .pool import as_2d, symmetric, window

HANDLERS, handles = table()


@handles("Conv")
def conv(ctx, node, ins):
    """Conv (1-D and 2-D; group, strides, dilations, pads, auto_pad)."""
    x, w = ctx.tensor(ins[0]), ctx.tensor(ins[1])
    b = ctx.tensor(ins[2]) if len(ins) > 2 and ins[2] is not None else None
    nd = x.ndim - 2
    if w.ndim != x.ndim:
        raise ctx.invalid(f"weight of shape {tuple(w.shape)} for input {tuple(x.shape)}")
    kernel = [int(k) for k in w.shape[2:]]
    given = ctx.attr("kernel_shape", None)
    if given is not None and [int(k) for k in given] != kernel:
        raise ctx.invalid(f"kernel_shape {given} differs from the weight's {kernel}")
    group = int(ctx.attr("group", 1))
    strides, dilations, amounts = window(ctx, [int(s) for s in x.shape[2:]], kernel)
    x4 = as_2d(ctx, x, "Conv")
    if nd == 1:
        w = w.reshape(int(w.shape[0]), int(w.shape[1]), 1, kernel[0])
        strides, dilations, amounts = [1] + strides, [1] + dilations, [(0, 0)] + amounts
    xp, padding = symmetric(ctx, x4, amounts, 0.0)
    n, _, h, wd = (int(s) for s in xp.shape)
    oh, ow = (
        (size + 2 * p - d * (k - 1) - 1) // s + 1
        for size, p, d, k, s in zip(
            (h, wd), padding, dilations, [int(k) for k in w.shape[2:]], strides
        )
    )
    ctx.check_size((n, int(w.shape[0]), oh, ow))
    y = F.conv2d(xp, w, b, tuple(strides), tuple(padding), tuple(dilations), group)
    if nd == 1:
        y = y.reshape(int(y.shape[0]), int(y.shape[1]), int(y.shape[3]))
    return y


def _per_channel(v: np.ndarray, rank: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (rank - 2))


@handles("BatchNormalization")
def batch_norm(ctx, node, ins):
    """BatchNormalization at inference (training_mode=1 is not supported)."""
    x = ctx.tensor(ins[0])
    scale, bias, mean, var = ins[1:5]
    eps = float(ctx.attr("epsilon", 1e-5))
    ctx.attr("momentum", None)  # running statistics are not updated at inference
    if ctx.attr("training_mode", 0):
        raise ctx.unsupported("training_mode=1", attribute="training_mode")
    if ctx.attr("spatial", 1) != 1:
        raise ctx.unsupported("spatial=0", attribute="spatial")
    ctx.attr("is_test", None)
    c = int(x.shape[1]) if x.ndim > 1 else 1
    params = (scale, bias, mean, var)
    if any(tuple(int(s) for s in p.shape) != (c,) for p in params):
        raise ctx.invalid(f"scale, B, mean and var must have shape ({c},)")
    if all(ctx.is_static(p) for p in params):
        # one multiply-add per channel, computed in float64 once here
        a = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
        shift = bias.astype(np.float64) - mean.astype(np.float64) * a
        dt = x.dtype.np
        rank = max(x.ndim, 2)
        y = x * ctx.tensor(_per_channel(a.astype(dt), rank))
        return y + ctx.tensor(_per_channel(shift.astype(dt), rank))
    t = [ctx.tensor(p) for p in params]
    return F.batch_norm(x, t[2], t[3], t[0], t[1], training=False, eps=eps)


@handles("LayerNormalization")
def layer_norm(ctx, node, ins):
    """LayerNormalization(X, Scale, B; axis, epsilon): over the dims from ``axis`` on (the
    Mean / InvStdDev outputs are not supported)."""
    x = ctx.tensor(ins[0])
    axis = ctx.axis(int(ctx.attr("axis", -1)), x.ndim)
    eps = float(ctx.attr("epsilon", 1e-5))
    ctx.attr("stash_type", 1)  # statistics in float32: what gpucore computes for float32
    normalized = tuple(int(s) for s in x.shape[axis:])
    scale = ctx.tensor(ins[1])
    bias = ctx.tensor(ins[2]) if len(ins) > 2 and ins[2] is not None else None
    if all(p is None or tuple(p.shape) == normalized for p in (scale, bias)):
        return [F.layer_norm(x, normalized, scale, bias, eps), None, None]
    ctx.broadcast(x.shape, scale.shape, *(() if bias is None else (bias.shape,)))
    dims = tuple(range(axis, x.ndim))
    xc = x - x.mean(dims, keepdim=True)
    y = xc * ((xc * xc).mean(dims, keepdim=True) + eps).rsqrt() * scale
    return [y if bias is None else y + bias, None, None]


@handles("RMSNormalization")
def rms_norm(ctx, node, ins):
    """RMSNormalization(X, scale; axis, epsilon) (opset 23)."""
    x, scale = ctx.tensor(ins[0]), ctx.tensor(ins[1])
    axis = ctx.axis(int(ctx.attr("axis", -1)), x.ndim)
    eps = float(ctx.attr("epsilon", 1e-5))
    ctx.attr("stash_type", 1)
    dims = tuple(range(axis, x.ndim))
    ctx.broadcast(x.shape, scale.shape)
    return x * ((x * x).mean(dims, keepdim=True) + eps).rsqrt() * scale


@handles("InstanceNormalization")
def instance_norm(ctx, node, ins):
    """InstanceNormalization(input, scale, B; epsilon)."""
    x, scale, bias = (ctx.tensor(v) for v in ins[:3])
    eps = float(ctx.attr("epsilon", 1e-5))
    return F.instance_norm(x, weight=scale, bias=bias, eps=eps)


@handles("Softmax", "LogSoftmax")
def softmax(ctx, node, ins):
    """Softmax / LogSoftmax(axis): along ``axis`` since opset 13; before, over the input
    flattened to 2-D at ``axis`` (default 1)."""
    x = ctx.tensor(ins[0])
    default = -1 if ctx.opset >= 13 else 1
    axis = ctx.axis(int(ctx.attr("axis", default)), max(x.ndim, 1))
    fn = F.softmax if node.op_type == "Softmax" else F.log_softmax
    if x.ndim == 0:
        return fn(x.reshape(1), dim=0).reshape()
    if ctx.opset >= 13 or axis == x.ndim - 1:
        return fn(x, dim=axis)
    dims = [int(s) for s in x.shape]
    flat = x.reshape(math.prod(dims[:axis]), math.prod(dims[axis:]))
    return fn(flat, dim=1).reshape(*dims)
