"""Neural-network primitives with fused kernels: softmax, log_softmax, cross-entropy over class
indices, and im2col/col2im (the lowering of conv2d)."""

from __future__ import annotations

import operator

from .. import dtypes as D
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .common import method, wrap_dim
from .registry import apply, defop


def _check_float(op, x):
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}(): expects a floating point tensor, got {x.dtype}")


def _softmax_bwd_bwd(ctx, gg):
    # out = y * (g - s), s = sum(g * y): differentiate with respect to g and y.
    g, y = ctx.saved
    dim = ctx.attrs["dim"]
    dg = apply(SOFTMAX_BACKWARD, gg, y, dim=dim)
    s = (g * y).sum(dim, keepdim=True)
    dy = gg * (g - s) - g * (gg * y).sum(dim, keepdim=True)
    return dg, dy


def _log_softmax_bwd_bwd(ctx, gg):
    # out = g - exp(y) * sum(g)
    g, y = ctx.saved
    dim = ctx.attrs["dim"]
    e = y.exp()
    dg = gg - (gg * e).sum(dim, keepdim=True)
    dy = -gg * e * g.sum(dim, keepdim=True)
    return dg, dy


SOFTMAX_BACKWARD = defop(
    "softmax_backward",
    infer=lambda g, y, dim: (g.shape, g.dtype),
    save_inputs=(0, 1),
    backward=_softmax_bwd_bwd,
)
LOG_SOFTMAX_BACKWARD = defop(
    "log_softmax_backward",
    infer=lambda g, y, dim: (g.shape, g.dtype),
    save_inputs=(0, 1),
    backward=_log_softmax_bwd_bwd,
)
SOFTMAX = defop(
    "softmax",
    infer=lambda x, dim: (x.shape, x.dtype),
    save_outputs=(0,),
    backward=lambda ctx, g: apply(SOFTMAX_BACKWARD, g, ctx.saved[0], **ctx.attrs),
)
LOG_SOFTMAX = defop(
    "log_softmax",
    infer=lambda x, dim: (x.shape, x.dtype),
    save_outputs=(0,),
    backward=lambda ctx, g: apply(LOG_SOFTMAX_BACKWARD, g, ctx.saved[0], **ctx.attrs),
)


@method("softmax")
def softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along dim, computed stably."""
    if dtype is not None:
        input = input.to(dtype)
    _check_float("softmax", input)
    return apply(SOFTMAX, input, dim=wrap_dim(dim, input.ndim, "softmax"))


@method("log_softmax")
def log_softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """x - logsumexp(x) along dim, computed stably."""
    if dtype is not None:
        input = input.to(dtype)
    _check_float("log_softmax", input)
    return apply(LOG_SOFTMAX, input, dim=wrap_dim(dim, input.ndim, "log_softmax"))


@method("logsumexp")
def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over dim, computed stably (shifted by the detached maximum)."""
    m = input.detach().amax(dim, keepdim=True)
    m = m.masked_fill(m.abs() == float("inf"), 0.0)
    out = (input - m).exp().sum(dim, keepdim=True).log() + m
    return out if keepdim else out.squeeze(dim)


# ----------------------------------------------------------------------------- cross-entropy
def _xent_bwd(ctx, g):
    logits, target, lse = ctx.saved
    return apply(XENT_BACKWARD, logits, target, lse, g, **ctx.attrs), None


def _xent_bwd_bwd(ctx, gg):
    # out[i, j] = g[i] * (p[i, j] - onehot[i, j]); p = softmax(logits).
    logits, target, lse, g = ctx.saved
    ignore = ctx.attrs["ignore_index"]
    p = (logits - lse.unsqueeze(1)).exp()
    from .indexing import one_hot

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


XENT = defop(
    "cross_entropy",
    infer=_xent_infer,
    save_inputs=(0, 1),
    save_outputs=(1,),
    backward=_xent_bwd,
)
XENT_BACKWARD = defop(
    "cross_entropy_backward",
    infer=lambda logits, target, lse, g, ignore_index: (logits.shape, logits.dtype),
    save_inputs=(0, 1, 2, 3),
    backward=_xent_bwd_bwd,
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


IM2COL = defop(
    "im2col",
    infer=_im2col_infer,
    backward=lambda ctx, g: apply(COL2IM, g, shape=ctx.attrs["src"], **_geom(ctx.attrs)),
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
        geom = {"kernel": (kh, kw), "stride": a["stride"], "padding": a["padding"],
                "dilation": a["dilation"]}
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
    from ..autograd.grad_mode import _state

    return _state.enabled


# Both inputs always saved: the backward kernel takes its geometry from them.
CONV2D = defop("conv2d", infer=_conv2d_infer, save_inputs=(0, 1), backward=_conv2d_bwd)


def _conv2d_backward_infer(x, w, g, *, need, stride, padding, dilation):
    # outputs not asked for are empty (the kernel skips them)
    return [(tuple(x.shape) if need[0] else (0,), x.dtype),
            (tuple(w.shape) if need[1] else (0,), x.dtype),
            ((w.shape[0],) if need[2] else (0,), x.dtype)]


# (gx, gw, gb) of conv2d in one pass over the images; no backward of its own: conv2d's backward
# takes the composite path when a graph of the gradients is wanted.
CONV2D_BACKWARD = defop("conv2d_backward", infer=_conv2d_backward_infer)


def conv2d_fused(x: Tensor, w: Tensor, b, stride, padding, dilation) -> Tensor:
    """conv2d of a 4-D input with groups = 1 as one fused op (gpucore.nn.functional.conv2d
    validates the arguments and decides when to use it)."""
    inputs = (x.contiguous(), w.contiguous()) + (() if b is None else (b.contiguous(),))
    return apply(CONV2D, *inputs, stride=tuple(stride), padding=tuple(padding),
                 dilation=tuple(dilation))
