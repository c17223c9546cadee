"""Pooling kernels (gpucore/ops/pool.py): the fused max_pool2d (values and flat indices) and its
backward, one C pass per plane (cpu/maxpool.c)."""

from __future__ import annotations

from .... import _cpu
from .common import _c, _check_index, kernel


@kernel("max_pool2d")
def _max_pool2d(outs, x, kernel, stride, padding, dilation, ceil_mode, src):
    """One C pass per window (cpu/maxpool.c): values and flat indices, PyTorch's scan rules;
    ceil_mode's windows past the input just see fewer positions."""
    vals, idx = outs
    n, c, h, w = x.shape
    oh, ow = vals.shape[2:]
    if n * c == 0:
        return
    _cpu.max_pool2d(_c(x), vals, idx, n * c, h, w, *kernel, *stride, *padding, *dilation, oh, ow)


@kernel("max_pool2d_backward")
def _max_pool2d_backward(out, g, indices, input_shape, kernel, stride, padding, dilation):
    """Scatter-add at the indices, plane by plane in C (overlapping windows sum in output
    order)."""
    n, c, h, w = input_shape
    oh, ow = g.shape[2:]
    if n * c == 0:
        return
    try:
        _cpu.max_pool2d_backward(
            _c(g), _c(indices), out, n * c, h, w, *kernel, *stride, *padding, *dilation, oh, ow
        )
    except IndexError:
        _check_index(indices, h * w, "max_pool2d_backward")
        raise


def _avg_geom(x_shape, out_shape, kernel, stride, padding):
    n, c, h, w = x_shape
    return (n * c, h, w, *kernel, *stride, *padding, *out_shape[2:])


@kernel("avg_pool2d")
def _avg_pool2d(out, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor, src):
    """One C pass per plane (cpu/avgpool.c), PyTorch's divisor rules."""
    if x.size == 0:
        return
    geom = _avg_geom(x.shape, out.shape, kernel, stride, padding)
    _cpu.avg_pool2d(_c(x), out, *geom, count_include_pad, divisor)


@kernel("avg_pool2d_backward")
def _avg_pool2d_backward(
    out, g, input_shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor
):
    """Each output adds g / divisor over its window, plane by plane (cpu/avgpool.c)."""
    if out.size == 0:
        return
    geom = _avg_geom(input_shape, g.shape, kernel, stride, padding)
    _cpu.avg_pool2d_backward(_c(g), out, *geom, count_include_pad, divisor)
