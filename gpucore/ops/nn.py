"""Neural-network primitives with fused kernels: cross-entropy over class indices, im2col/col2im
(the lowering of conv2d) and the fused conv2d; softmax, log_softmax and logsumexp are in
softmax.py (re-exported here).

kernels: backends/cpu/kernels/nn.py (cpu/softmax.c, conv.c, im2col.c),
backends/vulkan/kernels/nn.py (shaders/softmax.comp, cross_entropy.comp); im2col/col2im on Vulkan
in backends/vulkan/kernels/pool.py (shaders/im2col.comp)."""

from __future__ import annotations

import operator

import numpy as np

from .. import dtypes as D
from ..autograd.grad_mode import _state as _grad_state
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .indexing import one_hot
from .registry import apply, defop
from .samples import Sample, integers, uniform
from .softmax import (  # noqa: F401 - softmax's ops and forms, imported from here by others
    LOG_SOFTMAX,
    LOG_SOFTMAX_BACKWARD,
    SOFTMAX,
    SOFTMAX_BACKWARD,
    _check_float,
    _np_softmax,
    log_softmax,
    logsumexp,
    softmax,
)


# ----------------------------------------------------------------------------- cross-entropy
def _xent_bwd(ctx, g):
    logits, target, lse = ctx.saved
    return apply(XENT_BACKWARD, logits, target, lse, g, **ctx.attrs), None


def _xent_bwd_bwd(ctx, gg):
    # out[i, j] = g[i] * (p[i, j] - onehot[i, j]); p = softmax(logits).
    logits, target, lse, g = ctx.saved
    ignore = ctx.attrs["ignore_index"]
    p = (logits - lse.unsqueeze(1)).exp()
    valid = (target != ignore).to(logits.dtype).unsqueeze(1)
    safe_t = target.masked_fill(target == ignore, 0)
    oh = one_hot(safe_t, logits.shape[1]).to(logits.dtype)
    gg = gg * valid
    dg = (gg * (p - oh)).sum(1)
    h = gg * g.unsqueeze(1)
    dlogits = p * (h - (h * p).sum(1, keepdim=True))
    return dlogits, None, None, dg


def _xent_infer(logits, target, ignore_index):
    return [((logits.shape[0],), logits.dtype), ((logits.shape[0],), logits.dtype)]


def _np_xent(logits, target, ignore_index):
    m = logits.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(logits - m).sum(axis=1, keepdims=True)))[:, 0]
    valid = target != ignore_index
    picked = logits[np.arange(len(target)), np.where(valid, target, 0)]
    return np.where(valid, lse - picked, 0.0), lse


def _np_xent_backward(logits, target, g, ignore_index):
    onehot = target[:, None] == np.arange(logits.shape[1])
    valid = (target != ignore_index)[:, None]
    return np.where(valid, g[:, None] * (_np_softmax(logits, 1) - onehot), 0.0)


def _xent_samples(backward=False):
    """Targets with and without ignore_index (-100, a class, -1); a row per invocation (few
    classes) and a workgroup per row (many) on Vulkan; extreme logits; an empty batch. The
    backward op takes lse from the forward (detached, so finite differences see the lse of the
    perturbed logits, which its own backward assumes)."""

    def xent_backward(op, logits, target, g, ignore_index):
        lse = apply(XENT, logits.detach(), target, ignore_index=ignore_index)[1]
        return apply(op, logits, target, lse, g, ignore_index=ignore_index)

    def s(n, c, target, ignore_index, grad=True, seed=0, scale=1.0):
        logits = uniform(n, c, low=-2 * scale, high=2 * scale, seed=seed)
        if not backward:
            return Sample(logits, target, ignore_index=ignore_index, ref=_np_xent, grad=grad)
        return Sample(
            logits,
            target,
            uniform(n, seed=seed + 1),
            ignore_index=ignore_index,
            ref=_np_xent_backward,
            call=xent_backward,
            grad=grad,
        )

    return lambda: [
        s(5, 7, integers(7, 5, seed=1), -100, seed=2),
        s(6, 4, np.array([2, 0, 2, 3, 1, 2]), 2, seed=3),
        s(4, 3, np.array([-1, 0, 2, -1]), -1, seed=4),
        s(3, 6, integers(6, 3, seed=5), -100, seed=6, scale=40.0),
        s(16, 300, integers(300, 16, seed=7), 5, grad=False, seed=8),
        s(100, 41, integers(41, 100, seed=9), -100, grad=False, seed=10),
        s(0, 5, np.zeros(0, np.int64), -100, grad=False),
    ]


XENT = defop(
    "cross_entropy",
    infer=_xent_infer,
    save_inputs=(0, 1),
    save_outputs=(1,),
    backward=_xent_bwd,
    samples=_xent_samples(),
)
XENT_BACKWARD = defop(
    "cross_entropy_backward",
    infer=lambda logits, target, lse, g, ignore_index: (logits.shape, logits.dtype),
    save_inputs=(0, 1, 2, 3),
    backward=_xent_bwd_bwd,
    samples=_xent_samples(backward=True),
)


def cross_entropy_rows(logits: Tensor, target: Tensor, ignore_index: int = -100) -> Tensor:
    """Per-row loss ``logsumexp(logits[i]) - logits[i, target[i]]`` for 2-D logits (fused)."""
    _check_float("cross_entropy", logits)
    if logits.ndim != 2 or target.ndim != 1 or target.shape[0] != logits.shape[0]:
        raise ShapeError(
            f"cross_entropy(): expected logits [N, C] and target [N], got {tuple(logits.shape)} "
            f"and {tuple(target.shape)}"
        )
    if target.dtype is not D.int64:
        raise DTypeError(
            f"cross_entropy(): target must hold int64 class indices, got {target.dtype}"
        )
    loss, _ = apply(XENT, logits.contiguous(), target.contiguous(), ignore_index=ignore_index)
    return loss


# ----------------------------------------------------------------------------- im2col
def _conv_out(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _im2col_infer(x, kernel, stride, padding, dilation, src):
    n, c, h, w = x.shape
    oh = _conv_out(h, kernel[0], stride[0], padding[0], dilation[0])
    ow = _conv_out(w, kernel[1], stride[1], padding[1], dilation[1])
    if oh <= 0 or ow <= 0:
        raise ShapeError(
            f"im2col: input of shape {tuple(x.shape)} is too small for kernel {kernel} with "
            f"padding {padding} and dilation {dilation}"
        )
    return ((n, c * kernel[0] * kernel[1], oh * ow), x.dtype)


def _np_windows(shape, kernel, stride, padding, dilation):
    """Output size and, per kernel offset (ki, kj), the padded input's slices it reads."""
    (h, w), (kh, kw), (sh, sw), (dh, dw) = shape[2:], kernel, stride, dilation
    oh = (h + 2 * padding[0] - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * padding[1] - dw * (kw - 1) - 1) // sw + 1
    return (
        oh,
        ow,
        [
            (
                i,
                j,
                slice(i * dh, i * dh + sh * (oh - 1) + 1, sh),
                slice(j * dw, j * dw + sw * (ow - 1) + 1, sw),
            )
            for i in range(kh)
            for j in range(kw)
        ],
    )


def _np_im2col(x, kernel, stride, padding, dilation, src=None):
    n, c = x.shape[:2]
    oh, ow, wins = _np_windows(x.shape, kernel, stride, padding, dilation)
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    col = np.empty((n, c) + tuple(kernel) + (oh, ow))
    for i, j, rows, cols in wins:
        col[:, :, i, j] = xp[:, :, rows, cols]
    return col.reshape(n, c * kernel[0] * kernel[1], oh * ow)


def _np_col2im(col, shape, kernel, stride, padding, dilation):
    n, c, h, w = shape
    oh, ow, wins = _np_windows(shape, kernel, stride, padding, dilation)
    col = col.reshape((n, c) + tuple(kernel) + (oh, ow))
    xp = np.zeros((n, c, h + 2 * padding[0], w + 2 * padding[1]))
    for i, j, rows, cols in wins:
        xp[:, :, rows, cols] += col[:, :, i, j]
    return xp[:, :, padding[0] : padding[0] + h, padding[1] : padding[1] + w]


# (input shape, kernel, stride, padding, dilation, gradient-checked): stride, padding and
# dilation per axis, overlapping windows, and a large one
_CONV_GEOMS = [
    ((1, 2, 5, 5), (3, 3), (1, 1), (0, 0), (1, 1), True),
    ((2, 1, 6, 7), (2, 3), (2, 1), (1, 0), (1, 1), True),
    ((1, 2, 7, 6), (2, 2), (1, 2), (1, 1), (2, 1), True),
    ((2, 3, 16, 16), (3, 3), (1, 1), (1, 1), (1, 1), False),
]


def _im2col_samples(inverse=False):
    out = []
    for i, (shape, k, s, p, d, grad) in enumerate(_CONV_GEOMS):
        geom = {"kernel": k, "stride": s, "padding": p, "dilation": d}
        if inverse:
            col_shape = _np_im2col(np.zeros(shape), **geom).shape
            out.append(
                Sample(uniform(*col_shape, seed=i), shape=shape, ref=_np_col2im, grad=grad, **geom)
            )
        else:
            out.append(
                Sample(uniform(*shape, seed=i), src=shape, ref=_np_im2col, grad=grad, **geom)
            )
    return out


IM2COL = defop(
    "im2col",
    infer=_im2col_infer,
    backward=lambda ctx, g: apply(COL2IM, g, shape=ctx.attrs["src"], **_geom(ctx.attrs)),
    samples=_im2col_samples,
)


def _col2im_infer(col, shape, kernel, stride, padding, dilation):
    if len(shape) != 4:
        raise ShapeError(f"col2im: output_size must be [N, C, H, W], got {tuple(shape)}")
    n, c, h, w = shape
    oh = _conv_out(h, kernel[0], stride[0], padding[0], dilation[0])
    ow = _conv_out(w, kernel[1], stride[1], padding[1], dilation[1])
    want = (n, c * kernel[0] * kernel[1], oh * ow)
    if oh <= 0 or ow <= 0 or tuple(col.shape) != want:
        raise ShapeError(
            f"col2im: columns of shape {tuple(col.shape)} do not match output size {tuple(shape)} "
            f"with kernel {kernel}, stride {stride}, padding {padding} and dilation {dilation}; "
            f"expected columns of shape {want}"
        )
    return (tuple(shape), col.dtype)


COL2IM = defop(
    "col2im",
    infer=_col2im_infer,
    backward=lambda ctx, g: apply(IM2COL, g, src=ctx.attrs["shape"], **_geom(ctx.attrs)),
    samples=lambda: _im2col_samples(inverse=True),
)


def _geom(a):
    return {k: a[k] for k in ("kernel", "stride", "padding", "dilation")}


def _pair(v, name="kernel_size", least=1):
    try:
        if isinstance(v, (tuple, list)):
            p = tuple(map(operator.index, v))
        else:
            p = (operator.index(v),) * 2
    except TypeError:
        p = ()
    if len(p) != 2 or any(e < least for e in p):
        raise ValueError(
            f"im2col/col2im: {name} must be an int or a pair of ints >= {least}, got {v!r}"
        )
    return p


def im2col(input: Tensor, kernel_size, stride=1, padding=0, dilation=1) -> Tensor:
    """[N, C, H, W] -> [N, C*kh*kw, OH*OW] patches (the unfold that lowers conv2d to GEMM)."""
    if input.ndim != 4:
        raise ShapeError(f"im2col: expects a 4-D [N, C, H, W] input, got {tuple(input.shape)}")
    _check_float("im2col", input)
    return apply(
        IM2COL,
        input.contiguous(),
        kernel=_pair(kernel_size),
        stride=_pair(stride, "stride"),
        padding=_pair(padding, "padding", 0),
        dilation=_pair(dilation, "dilation"),
        src=tuple(input.shape),
    )


def col2im(cols: Tensor, output_size, kernel_size, stride=1, padding=0, dilation=1) -> Tensor:
    """The adjoint of im2col: sums patches back into an [N, C, H, W] tensor."""
    _check_float("col2im", cols)
    return apply(
        COL2IM,
        cols.contiguous(),
        shape=tuple(output_size),
        kernel=_pair(kernel_size),
        stride=_pair(stride, "stride"),
        padding=_pair(padding, "padding", 0),
        dilation=_pair(dilation, "dilation"),
    )


# ----------------------------------------------------------------------------- fused conv2d
# conv2d with groups = 1 as one op: the C kernel unfolds and multiplies image by image in cache
# (no batch-sized column tensor, no separate bias add, bias-grad sum or weight-grad batch sum).
# Inputs (x, w) or (x, w, b); attrs stride, padding, dilation (pairs; zero padding).
def _conv2d_infer(x, w, b=None, *, stride, padding, dilation):
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    oh = _conv_out(h, kh, stride[0], padding[0], dilation[0])
    ow = _conv_out(wd, kw, stride[1], padding[1], dilation[1])
    if ci != c or oh <= 0 or ow <= 0 or (b is not None and tuple(b.shape) != (o,)):
        raise ShapeError(
            f"conv2d: input {tuple(x.shape)}, weight {tuple(w.shape)} and bias "
            f"{None if b is None else tuple(b.shape)} do not fit (stride {stride}, padding "
            f"{padding}, dilation {dilation})"
        )
    return ((n, o, oh, ow), x.dtype)


def _conv2d_bwd(ctx, g):
    x, w = ctx.saved
    need = ctx.needs_input_grad
    a = ctx.attrs
    if _grad_enabled():
        # create_graph: the same gradients from differentiable ops, so they can be differentiated
        kh, kw = w.shape[2:]
        geom = {
            "kernel": (kh, kw),
            "stride": a["stride"],
            "padding": a["padding"],
            "dilation": a["dilation"],
        }
        n, o = g.shape[:2]
        g3 = g.reshape(n, o, -1)
        w2 = w.reshape(o, -1)
        gx = gw = None
        if need[0]:
            gx = apply(COL2IM, w2.mT.matmul(g3), shape=tuple(x.shape), **geom)
        if need[1]:
            cols = apply(IM2COL, x, src=tuple(x.shape), **geom)
            gw = g3.matmul(cols.mT).sum(0).reshape(w.shape)
        gb = g3.sum((0, 2)) if len(need) == 3 and need[2] else None
        return (gx, gw) if len(need) == 2 else (gx, gw, gb)
    bias = len(need) == 3 and need[2]
    outs = apply(CONV2D_BACKWARD, x, w, g.contiguous(), need=(need[0], need[1], bias), **a)
    gx, gw, gb = outs
    return (gx if need[0] else None, gw if need[1] else None) + ((gb,) if len(need) == 3 else ())


def _grad_enabled():
    return _grad_state.enabled


def _np_conv2d(x, w, b=None, *, stride, padding, dilation):
    n, o = x.shape[0], w.shape[0]
    cols = _np_im2col(x, w.shape[2:], stride, padding, dilation)
    out = np.einsum("ok,nkp->nop", w.reshape(o, -1), cols)
    if b is not None:
        out = out + b[:, None]
    oh, ow, _ = _np_windows(x.shape, w.shape[2:], stride, padding, dilation)
    return out.reshape(n, o, oh, ow)


def _np_conv2d_backward(x, w, g, *, need, stride, padding, dilation):
    n, o = g.shape[:2]
    geom = (w.shape[2:], stride, padding, dilation)
    g3 = g.reshape(n, o, -1)
    none = np.zeros(0)
    gx = _np_col2im(np.einsum("ok,nop->nkp", w.reshape(o, -1), g3), x.shape, *geom)
    gw = np.einsum("nop,nkp->ok", g3, _np_im2col(x, *geom)).reshape(w.shape)
    return (
        gx if need[0] else none,
        gw if need[1] else none,
        g.sum(axis=(0, 2, 3)) if need[2] else none,
    )


def _conv_samples(backward=False):
    """conv2d (with and without bias) and conv2d_backward (with each output asked for or not)
    on _CONV_GEOMS with 2 or 3 output channels."""
    out = []
    for i, (shape, k, s, p, d, grad) in enumerate(_CONV_GEOMS):
        o = 3 - i % 2
        x, w = uniform(*shape, seed=i), uniform(o, shape[1], *k, seed=i + 10)
        geom = {"stride": s, "padding": p, "dilation": d}
        if backward:
            oh, ow, _ = _np_windows(shape, k, s, p, d)
            need = [
                (True, True, True),
                (True, False, False),
                (False, True, True),
                (True, True, False),
            ][i]
            out.append(
                Sample(
                    x,
                    w,
                    uniform(shape[0], o, oh, ow, seed=i + 20),
                    need=need,
                    ref=_np_conv2d_backward,
                    atol=1e-4,
                    **geom,
                )
            )
        else:
            bias = (uniform(o, seed=i + 30),) if i % 2 == 0 else ()
            out.append(Sample(x, w, *bias, ref=_np_conv2d, grad=grad, atol=1e-4, **geom))
    return out


# Both inputs always saved: the backward kernel takes its geometry from them.
CONV2D = defop(
    "conv2d", infer=_conv2d_infer, save_inputs=(0, 1), backward=_conv2d_bwd, samples=_conv_samples
)


def _conv2d_backward_infer(x, w, g, *, need, stride, padding, dilation):
    # outputs not asked for are empty (the kernel skips them)
    return [
        (tuple(x.shape) if need[0] else (0,), x.dtype),
        (tuple(w.shape) if need[1] else (0,), x.dtype),
        ((w.shape[0],) if need[2] else (0,), x.dtype),
    ]


# (gx, gw, gb) of conv2d in one pass over the images; no backward of its own: conv2d's backward
# takes the composite path when a graph of the gradients is wanted.
CONV2D_BACKWARD = defop(
    "conv2d_backward", infer=_conv2d_backward_infer, samples=lambda: _conv_samples(backward=True)
)


def conv2d_fused(x: Tensor, w: Tensor, b, stride, padding, dilation) -> Tensor:
    """conv2d of a 4-D input with groups = 1 as one fused op (gpucore.nn.functional.conv2d
    validates the arguments and decides when to use it)."""
    inputs = (x.contiguous(), w.contiguous()) + (() if b is None else (b.contiguous(),))
    return apply(
        CONV2D, *inputs, stride=tuple(stride), padding=tuple(padding), dilation=tuple(dilation)
    )
