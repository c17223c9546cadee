"""Kernels of gpucore/ops/relu_fused.py: the ReLU in the epilogue of linear's GEMM
(cpu/gemm.c's gemm_ex act) and of conv2d_forward (its act), the calls of the unfused ops'
kernels (linalg.py's linear, nn.py's conv2d, pool.py's max_pool2d) with the activation added."""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .common import _c, _check_index, kernel
from .linalg import linear_into
from .nn import conv2d_into

_RELU = _cpu.UNARY_RELU


@kernel("linear_relu")
def _linear_relu(out, x, w, b=None):
    linear_into(out, x, w, b, _RELU)


@kernel("conv2d_relu")
def _conv2d_relu(out, x, w, b=None, *, stride, padding, dilation):
    conv2d_into(out, x, w, b, stride, padding, dilation, None, _RELU)


@kernel("conv2d_relu_max_pool2d")
def _conv2d_relu_max_pool2d(outs, x, w, b=None, **a):
    """The convolution with its ReLU into scratch, then max_pool2d's C pass over it; where
    cpu/conv_c1.c's path applies (and takes it: at least as many images as threads, an image's
    output within half the L2), both in one call (each image's output pooled from the cache,
    the same bits)."""
    vals, idx = outs
    n, o = vals.shape[:2]
    pool = (*a["pool_kernel"], *a["pool_stride"], *a["pool_padding"], *a["pool_dilation"])
    geo = (*x.shape, *w.shape[2:], *a["stride"], *a["padding"], *a["dilation"], o)
    bc = None if b is None else _c(b)
    if n * o and _cpu.conv2d_relu_max_pool2d(
        _c(x), _c(w), bc, vals, idx, *geo, *pool, *vals.shape[2:]
    ):
        return
    shape = (n, o, *_conv_hw(x.shape, w.shape, a))
    y = np.ndarray(shape, x.dtype, _cpu.host_empty(x.itemsize * n * o * shape[2] * shape[3]))
    conv2d_into(y, x, w, b, a["stride"], a["padding"], a["dilation"], None, _RELU)
    if n * o == 0:
        return
    h, wd = y.shape[2:]
    _cpu.max_pool2d(
        y,
        vals,
        idx,
        n * o,
        h,
        wd,
        *a["pool_kernel"],
        *a["pool_stride"],
        *a["pool_padding"],
        *a["pool_dilation"],
        *vals.shape[2:],
    )


def _conv_hw(xs, ws, a) -> tuple:
    return tuple(
        (xs[2 + i] + 2 * a["padding"][i] - a["dilation"][i] * (ws[2 + i] - 1) - 1) // a["stride"][i]
        + 1
        for i in range(2)
    )


@kernel("max_pool2d_relu_backward")
def _max_pool2d_relu_backward(
    out, g, indices, vals, input_shape, kernel, stride, padding, dilation
):
    """max_pool2d_backward's C pass with g masked by vals > 0 plane by plane (cpu/maxpool.c)."""
    n, c, h, w = input_shape
    oh, ow = g.shape[2:]
    if n * c == 0:
        return
    geom = (n * c, h, w, *kernel, *stride, *padding, *dilation, oh, ow)
    try:
        _cpu.max_pool2d_backward(_c(g), _c(indices), out, *geom, _c(vals))
    except IndexError:
        _check_index(indices, h * w, "max_pool2d_relu_backward")
        raise
