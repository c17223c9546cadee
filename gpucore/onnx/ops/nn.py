"""Conv, BatchNormalization, LayerNormalization, InstanceNormalization, RMSNormalization,
Softmax, LogSoftmax.

Inference-mode batch norm with static statistics becomes one per-channel multiply-add (the
runtime folds it into the convolution before it); layer, RMS and group norm are gpucore's
nn.functional forms (the fused ops on host tensors; compositions in a captured graph, which the
runtime fuses into one ``layer_norm`` node where it matches).
"""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import float32
from ...nn import functional as F
from .common import gc, table
from .pool import as_2d, symmetric, window

HANDLERS, handles = table()


@handles("Conv")
def conv(ctx, node, ins):
    """Conv (1-D to 3-D; group, strides, dilations, pads, auto_pad)."""
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
    outs = [
        (size + 2 * p - d * (k - 1) - 1) // s + 1
        for size, p, d, k, s in zip(
            (int(s) for s in xp.shape[2:]), padding, dilations, [int(k) for k in w.shape[2:]],
            strides,
        )
    ]  # fmt: skip
    ctx.check_size((int(xp.shape[0]), int(w.shape[0]), *outs))
    conv_nd = F.conv3d if nd == 3 else F.conv2d
    y = conv_nd(xp, w, b, tuple(strides), tuple(padding), tuple(dilations), group)
    if nd == 1:
        y = y.reshape(int(y.shape[0]), int(y.shape[1]), int(y.shape[3]))
    return y


def _per_channel(v: np.ndarray, rank: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (rank - 2))


def _batch_norm_training(ctx, x, params: list, eps: float, momentum: float) -> list:
    scale, bias, mean, var = params
    if x.ndim < 2:
        raise ctx.invalid(f"training_mode=1 needs [N, C, ...] input, got {list(x.shape)}")
    dims = (0, *range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    batch_mean = x.mean(dims)
    xc = x - batch_mean.reshape(*shape)
    batch_var = (xc * xc).mean(dims)
    y = xc * (batch_var.reshape(*shape) + eps).rsqrt() * scale.reshape(*shape)
    y = y + bias.reshape(*shape)
    running_mean = mean * momentum + batch_mean * (1.0 - momentum)
    running_var = var * momentum + batch_var * (1.0 - momentum)
    return [y, running_mean, running_var]


@handles("BatchNormalization")
def batch_norm(ctx, node, ins):
    """BatchNormalization: at inference with the given statistics; with training_mode=1 with
    the batch's (mean and population variance over every dim but the channels), also giving
    the updated running statistics ``running * momentum + batch * (1 - momentum)``."""
    x = ctx.tensor(ins[0])
    scale, bias, mean, var = ins[1:5]
    eps = float(ctx.attr("epsilon", 1e-5))
    momentum = float(ctx.attr("momentum", 0.9))  # (read by the training mode only)
    if ctx.attr("spatial", 1) != 1:
        raise ctx.unsupported("spatial=0", attribute="spatial")
    ctx.attr("is_test", None)
    c = int(x.shape[1]) if x.ndim > 1 else 1
    params = (scale, bias, mean, var)
    if any(tuple(int(s) for s in p.shape) != (c,) for p in params):
        raise ctx.invalid(f"scale, B, mean and var must have shape ({c},)")
    if ctx.attr("training_mode", 0):
        return _batch_norm_training(ctx, x, [ctx.tensor(p) for p in params], eps, momentum)
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
    """LayerNormalization(X, Scale, B; axis, epsilon, stash_type) -> Y, Mean, InvStdDev: over
    the dims from ``axis`` on; the statistics in float32 (stash_type 1) or X's dtype (0)."""
    x = ctx.tensor(ins[0])
    axis = ctx.axis(int(ctx.attr("axis", -1)), x.ndim)
    eps = float(ctx.attr("epsilon", 1e-5))
    stash = int(ctx.attr("stash_type", 1))
    if stash not in (0, 1):
        raise ctx.unsupported(f"stash_type={stash}", attribute="stash_type")
    normalized = tuple(int(s) for s in x.shape[axis:])
    scale = ctx.tensor(ins[1])
    bias = ctx.tensor(ins[2]) if len(ins) > 2 and ins[2] is not None else None
    stats = any(node.outputs[1:])
    fits = all(p is None or tuple(p.shape) == normalized for p in (scale, bias))
    if fits and not stats and (stash == 0 or x.dtype is float32):
        return [F.layer_norm(x, normalized, scale, bias, eps), None, None]
    ctx.broadcast(x.shape, scale.shape, *(() if bias is None else (bias.shape,)))
    dims = tuple(range(axis, x.ndim))
    work = x.to(float32) if stash == 1 and x.dtype is not float32 else x
    mean = work.mean(dims, keepdim=True)
    xc = work - mean
    inv = ((xc * xc).mean(dims, keepdim=True) + eps).rsqrt()
    y = xc * inv
    y = (y.to(x.dtype) if y.dtype is not x.dtype else y) * scale
    return [y if bias is None else y + bias, mean, inv]


@handles("RMSNormalization")
def rms_norm(ctx, node, ins):
    """RMSNormalization(X, scale; axis, epsilon) (opset 23)."""
    x, scale = ctx.tensor(ins[0]), ctx.tensor(ins[1])
    axis = ctx.axis(int(ctx.attr("axis", -1)), x.ndim)
    eps = float(ctx.attr("epsilon", 1e-5))
    ctx.attr("stash_type", 1)
    normalized = tuple(int(s) for s in x.shape[axis:])
    if tuple(scale.shape) == normalized and scale.dtype is x.dtype:
        return F.rms_norm(x, normalized, scale, eps)  # the fused op on host tensors
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


@handles("Hardmax")
def hardmax(ctx, node, ins):
    """Hardmax(axis): 1 at the first maximum along ``axis`` (since opset 13; before, of the
    input flattened to 2-D at ``axis``, default 1), 0 elsewhere."""
    x = ctx.tensor(ins[0])
    dims = [int(s) for s in x.shape]
    default = -1 if ctx.opset >= 13 else 1
    axis = ctx.axis(int(ctx.attr("axis", default)), max(x.ndim, 1))
    work = x
    if ctx.opset < 13 and axis != x.ndim - 1:
        work = x.reshape(math.prod(dims[:axis]), math.prod(dims[axis:]))
        axis = 1
    n = int(work.shape[axis])
    where = [1] * work.ndim
    where[axis] = n
    positions = ctx.tensor(np.arange(n, dtype=np.int64).reshape(where))
    y = (positions == work.argmax(dim=axis, keepdim=True)).to(x.dtype)
    return y.reshape(*dims) if tuple(y.shape) != tuple(dims) else y


@handles("LpNormalization")
def lp_normalization(ctx, node, ins):
    """LpNormalization(axis, p: 1 or 2): x / its norm along ``axis`` (0 where the norm is)."""
    x = ctx.tensor(ins[0])
    axis = ctx.axis(int(ctx.attr("axis", -1)), x.ndim)
    p = int(ctx.attr("p", 2))
    if p not in (1, 2):
        raise ctx.unsupported(f"p={p}", attribute="p")
    norm = x.abs().sum(axis, keepdim=True) if p == 1 else (x * x).sum(axis, keepdim=True).sqrt()
    zero = norm == 0.0
    return gc.where(zero, x * 0.0, x / gc.where(zero, norm + 1.0, norm))


@handles("MeanVarianceNormalization")
def mean_variance_normalization(ctx, node, ins):
    """MeanVarianceNormalization(axes = [0, 2, 3]): (x - mean) / (std + 1e-9)."""
    x = ctx.tensor(ins[0])
    axes = tuple(ctx.axis(int(a), x.ndim) for a in ctx.attr("axes", [0, 2, 3]))
    mean = x.mean(axes, keepdim=True)
    var = (x * x).mean(axes, keepdim=True) - mean * mean
    return (x - mean) / (var.sqrt() + 1e-9)


@handles("GroupNormalization")
def group_normalization(ctx, node, ins):
    """GroupNormalization(num_groups, epsilon, stash_type): statistics per group of channels;
    scale and bias per channel (opset 21) or per group (opset 18)."""
    x, scale, bias = (ctx.tensor(v) for v in ins[:3])
    groups = int(ctx.attr("num_groups"))
    eps = float(ctx.attr("epsilon", 1e-5))
    ctx.attr("stash_type", 1)  # float32 statistics: what gpucore computes for float32
    dims = [int(s) for s in x.shape]
    c = dims[1]
    if groups <= 0 or c % groups:
        raise ctx.invalid(f"num_groups {groups} does not divide {c} channels")
    if int(scale.shape[0]) != c:  # per group: each value repeated for the group's channels
        scale, bias = (
            v.reshape(groups, 1).expand(groups, c // groups).reshape(c) for v in (scale, bias)
        )
    return F.group_norm(x, groups, scale, bias, eps)  # the fused op on host tensors


@handles("LRN")
def lrn(ctx, node, ins):
    """LRN(size, alpha, beta, bias): x / (bias + alpha / size * (sum of x^2 over ``size``
    neighbouring channels)) ^ beta."""
    x = ctx.tensor(ins[0])
    size = int(ctx.attr("size"))
    alpha, beta = float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75))
    bias = float(ctx.attr("bias", 1.0))
    c = int(x.shape[1])
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = (x * x).movedim(1, -1)
    padded = F.pad(sq, (before, after))
    total = padded.narrow(-1, 0, c)
    for i in range(1, size):
        total = total + padded.narrow(-1, i, c)
    return x / (total.movedim(-1, 1) * (alpha / size) + bias) ** beta


def _transpose_pads(ctx, spatial: list, kernel: list, strides, dilations, extra) -> list:
    """ConvTranspose's (pad before, pad after) per spatial dim: from pads, or generated from
    output_shape / auto_pad SAME_* (the spec's total_padding equations)."""
    nd = len(kernel)
    pads = [int(p) for p in (ctx.attr("pads", None) or [0] * (2 * nd))]
    auto = ctx.attr("auto_pad", "NOTSET")
    shape = ctx.attr("output_shape", None)
    if shape is None and auto not in ("SAME_UPPER", "SAME_LOWER"):
        if auto not in ("NOTSET", "VALID"):
            raise ctx.unsupported(f"auto_pad={auto!r}", attribute="auto_pad")
        return list(zip(pads[:nd], pads[nd:])) if auto == "NOTSET" else [(0, 0)] * nd
    shape = [int(s) for s in shape][-nd:] if shape is not None else None
    out = []
    for i in range(nd):
        want = shape[i] if shape is not None else spatial[i] * strides[i]
        full = strides[i] * (spatial[i] - 1) + extra[i] + (kernel[i] - 1) * dilations[i] + 1
        total, half = full - want, (full - want) // 2
        out.append((half, total - half) if auto == "SAME_UPPER" else (total - half, half))
    return out


@handles("ConvTranspose")
def conv_transpose(ctx, node, ins):
    """ConvTranspose (1-D to 3-D; group, strides, dilations, pads, output_padding,
    output_shape, auto_pad): a stride-1 convolution of the input spread out by the strides
    (zeros between) and padded by the dilated kernel less the pads, with the weight flipped
    and its in / out channels swapped."""
    x, w = ctx.tensor(ins[0]), ctx.tensor(ins[1])
    b = ctx.tensor(ins[2]) if len(ins) > 2 and ins[2] is not None else None
    nd = x.ndim - 2
    kernel = [int(k) for k in w.shape[2:]]
    ctx.attr("kernel_shape", None)
    group = int(ctx.attr("group", 1))
    strides = [int(s) for s in (ctx.attr("strides", None) or [1] * nd)]
    dilations = [int(d) for d in (ctx.attr("dilations", None) or [1] * nd)]
    extra = [int(p) for p in (ctx.attr("output_padding", None) or [0] * nd)]
    spatial = [int(s) for s in x.shape[2:]]
    amounts = _transpose_pads(ctx, spatial, kernel, strides, dilations, extra)
    x4 = as_2d(ctx, x, "ConvTranspose")
    if nd == 1:
        w = w.reshape(*[int(s) for s in w.shape[:2]], 1, kernel[0])
        kernel, strides, dilations = [1] + kernel, [1] + strides, [1] + dilations
        extra, amounts = [0] + extra, [(0, 0)] + amounts
    n, c, *sizes = (int(s) for s in x4.shape)
    sp = len(sizes)
    if any(s > 1 for s in strides):  # zeros between the input's elements
        split = [n, c] + [v for size in sizes for v in (size, 1)]
        widths = [v for s in reversed(strides) for v in (0, s - 1, 0, 0)]
        spread = F.pad(x4.reshape(*split), tuple(widths))
        x4 = spread.reshape(n, c, *[size * s for size, s in zip(sizes, strides)])
        for dim, (size, s) in enumerate(zip(sizes, strides), 2):
            x4 = x4.narrow(dim, 0, (size - 1) * s + 1)
    for dim, (k, d, (lo, hi), e) in enumerate(zip(kernel, dilations, amounts, extra), 2):
        before, after = d * (k - 1) - lo, d * (k - 1) - hi + e
        if before < 0:
            x4 = x4.narrow(dim, -before, int(x4.shape[dim]) + before)
        if after < 0:
            x4 = x4.narrow(dim, 0, int(x4.shape[dim]) + after)
        widths = [0] * (2 * sp)
        widths[2 * (sp + 1 - dim)] = max(before, 0)
        widths[2 * (sp + 1 - dim) + 1] = max(after, 0)
        if any(widths):
            x4 = F.pad(x4, tuple(widths))
    cin, cout_g = int(w.shape[0]), int(w.shape[1])
    wt = w.reshape(group, cin // group, cout_g, *kernel).transpose(1, 2)
    spatial_dims = tuple(range(2, 2 + sp))
    wt = gc.flip(wt.reshape(group * cout_g, cin // group, *kernel), spatial_dims)
    conv_nd = F.conv3d if sp == 3 else F.conv2d
    y = conv_nd(x4, wt, b, (1,) * sp, (0,) * sp, tuple(dilations), group)
    return y.reshape(int(y.shape[0]), int(y.shape[1]), int(y.shape[3])) if nd == 1 else y
