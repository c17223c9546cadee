"""Neural-network kernels (gpucore/ops/nn.py): softmax/log_softmax and their backward ops,
the fused cross-entropy (+ backward), im2col/col2im and the fused conv2d (+ backward)."""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .... import dtypes as D
from ....errors import GpucoreIndexError
from .common import _c, _oni, kernel


# ----------------------------------------------------------------------------- softmax, xent
def _softmax_geom(x, dim: int):
    if x.ndim == 0:
        return _c(x), 1, 1, 1
    return _oni(x, (dim,))


def _softmax_kernel(log):
    def run(out, x, dim):
        xc, outer, n, inner = _softmax_geom(x, dim)
        _cpu.softmax(xc.reshape(-1), out.reshape(-1), outer, n, inner, log)

    return run


def _softmax_bwd_kernel(log):
    def run(out, g, y, dim):
        gc, outer, n, inner = _softmax_geom(g, dim)
        yc, *_ = _softmax_geom(y, dim)
        _cpu.softmax_backward(gc.reshape(-1), yc.reshape(-1), out.reshape(-1), outer, n, inner, log)

    return run


kernel("softmax")(_softmax_kernel(0))
kernel("log_softmax")(_softmax_kernel(1))
kernel("softmax_backward")(_softmax_bwd_kernel(0))
kernel("log_softmax_backward")(_softmax_bwd_kernel(1))


@kernel("cross_entropy")
def _xent(outs, logits, target, ignore_index):
    loss, lse = outs
    n, c = logits.shape
    try:
        _cpu.cross_entropy_forward(_c(logits), _c(target), loss, lse, n, c, ignore_index)
    except IndexError as e:
        raise GpucoreIndexError(f"cross_entropy(): {e}") from None


@kernel("cross_entropy_backward")
def _xent_bwd(out, logits, target, lse, g, ignore_index):
    n, c = logits.shape
    _cpu.cross_entropy_backward(_c(logits), _c(target), _c(lse), _c(g), out, n, c, ignore_index)


# ----------------------------------------------------------------------------- im2col, conv2d
@kernel("im2col")
def _im2col(out, x, kernel, stride, padding, dilation, src):
    n, c, h, w = x.shape
    _cpu.im2col(_c(x), out, n, c, h, w, *kernel, *stride, *padding, *dilation)


@kernel("col2im")
def _col2im(out, col, shape, kernel, stride, padding, dilation):
    n, c, h, w = shape
    _cpu.col2im(_c(col), out, n, c, h, w, *kernel, *stride, *padding, *dilation)


def conv2d_into(out, x, w, b, stride, padding, dilation, *epilogue) -> None:
    """conv2d_forward of x [n, c, h, w] and w [o, c, kh, kw] into out; ``epilogue``: the
    binding's optional (residual, activation) arguments."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    _cpu.conv2d_forward(
        _c(x),
        _c(w),
        None if b is None else _c(b),
        out,
        n,
        c,
        h,
        wd,
        kh,
        kw,
        *stride,
        *padding,
        *dilation,
        o,
        *epilogue,
    )


@kernel("conv2d")
def _conv2d(out, x, w, b=None, *, stride, padding, dilation):
    conv2d_into(out, x, w, b, stride, padding, dilation)


@kernel("conv2d_backward")
def _conv2d_backward(outs, x, w, g, *, need, stride, padding, dilation):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    gx, gw, gb = (t if nd else None for t, nd in zip(outs, need))
    _cpu.conv2d_backward(
        _c(x), _c(w), _c(g), gx, gw, gb, n, c, h, wd, kh, kw, *stride, *padding, *dilation, o
    )


# ----------------------------------------------------------------------------- bfloat16 conv2d
def _bf16_conv_native(*geometry: int) -> bool:
    """Whether bf16 conv2d of this geometry (``n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o``)
    runs on the bf16 GEMM (cpu/gemm_bf16.c gc_conv2d_bf16) rather than widened to float32 (the
    rule measured by benchmarks/bf16_conv.py, table in cpu/README.md): yes, except where the
    float32 conv runs Winograd F(4x4, 3x3) on an output whose sides are multiples of 4 (no
    partial tiles): its 4x fewer multiplies (less its transforms) took 0.8-1.2x the bf16 GEMM
    conv's time (28x28: 0.8), while with partial tiles (14x14, 7x7 outputs) the bf16 GEMM was
    1.03-1.8x faster, and 1.3-2.7x on the strided, 1x1, 5x5 and 7x7 convs measured."""
    if not _cpu.conv2d_winograd(*geometry):
        return True
    _, _, h, w, _, _, _, _, ph, pw, _, _, _ = geometry
    return (h + 2 * ph - 2) % 4 != 0 or (w + 2 * pw - 2) % 4 != 0  # Winograd: 3x3, stride 1


def _conv2d_bf16(out, x, w, b=None, *, stride, padding, dilation):
    """bfloat16 conv2d forward: on the bf16 GEMM (cpu/gemm_bf16.c, where the CPU has AVX-512
    BF16) where _bf16_conv_native says it is faster, else the widened float32 conv rounded back
    once (what every bf16 op without a ``bf16`` form does)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    if _bf16_conv_native(n, c, h, wd, kh, kw, *stride, *padding, *dilation, o):
        bias = None if b is None else D.bf16_to_f32(b)
        _cpu.conv2d_bf16(
            _c(x), _c(w), bias, out, n, c, h, wd, kh, kw, *stride, *padding, *dilation, o
        )
        return
    f32 = [None if t is None else D.bf16_to_f32(t).reshape(t.shape) for t in (x, w, b)]
    y = np.empty(out.shape, np.float32)
    _conv2d(y, *f32, stride=stride, padding=padding, dilation=dilation)
    out[...] = D.f32_to_bf16(y).reshape(out.shape)


if _cpu.gemm_bf16_kernel() is not None:
    _conv2d.bf16 = _conv2d_bf16
