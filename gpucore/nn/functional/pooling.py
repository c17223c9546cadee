"""Pooling: max_pool2d (one fused registry op with its own backward, gpucore/ops/pool.py),
avg_pool2d (im2col + a mean, masked for padding and ceil_mode) and adaptive_avg_pool2d (reshape
+ mean, or two matmuls with PyTorch's bin matrices). Masks and bins are built once per shape.
"""

from __future__ import annotations

import functools
import operator

import numpy as np

from ...creation import zeros
from ...errors import ShapeError
from ...ops import nn as nn_ops
from ...ops import pool as _pool
from ...ops.joining import cat
from ...ops.registry import CAPTURE, capturing
from ...tensor import Tensor
from ._utils import _as_4d, _check_tensor, _const, _pair, _single

_pool_out = _pool.pool_out  # (output size, end padding for ceil_mode) of one axis


@functools.lru_cache(maxsize=512)
def _window_mask(h, w, k, s, p, d, oh, ow, lo, hi):
    """bool [kh*kw, oh*ow]: which window positions of each output lie in rows/cols [lo, hi)
    (lo/hi: pairs, relative to the unpadded input). None when all of them do."""
    inside = []
    for ax in range(2):
        pos = (
            np.arange([oh, ow][ax])[None, :] * s[ax] - p[ax] + np.arange(k[ax])[:, None] * d[ax]
        )  # [k, o]
        inside.append((pos >= lo[ax]) & (pos < hi[ax]))
    m = inside[0][:, None, :, None] & inside[1][None, :, None, :]
    m = m.reshape(k[0] * k[1], oh * ow)
    return None if m.all() else m


def _pool_cols(op, x, k, s, p, d, ceil_mode):
    """Windows of every channel: ([N*C, kh*kw, OH*OW], (OH, OW))."""
    n, c, h, w = x.shape
    oh, eh = _pool_out(op, h, k[0], s[0], p[0], d[0], ceil_mode)
    ow, ew = _pool_out(op, w, k[1], s[1], p[1], d[1], ceil_mode)
    xi = x.reshape(n * c, 1, h, w)
    if eh or ew:  # ceil_mode: windows reach past the padding; extend with zeros (masked later)
        if eh:
            xi = cat([xi, zeros(n * c, 1, eh, w, dtype=x.dtype)], 2)
        if ew:
            xi = cat([xi, zeros(n * c, 1, h + eh, ew, dtype=x.dtype)], 3)
    return nn_ops.im2col(xi, k, s, p, d), (oh, ow)


def _pool_args(op, kernel_size, stride, padding, dilation=1):
    k = _pair(kernel_size, op, "kernel_size", 1)
    empty = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    s = k if empty else _pair(stride, op, "stride", 1)
    p = _pair(padding, op, "padding", 0)
    d = _pair(dilation, op, "dilation", 1)
    return k, s, p, d


def max_pool2d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """Max over sliding windows (torch.nn.functional.max_pool2d); padding counts as -inf.

    One fused op (gpucore.ops.pool): the gradient goes to the first maximum of each window
    (row-major; a NaN wins, the window's last NaN as in PyTorch), summed where windows overlap.
    With return_indices, also the flat index into H*W of each maximum.
    """
    x, squeeze = _as_4d("max_pool2d", input)
    k, s, p, d = _pool_args("max_pool2d", kernel_size, stride, padding, dilation)
    for i in range(2):
        if p[i] > (d[i] * (k[i] - 1) + 1) // 2:
            raise ValueError(
                f"max_pool2d(): padding should be at most half of the effective kernel size, "
                f"got padding={p}, kernel_size={k} and dilation={d}"
            )
    out, ind = _pool.max_pool2d_with_indices(x, k, s, p, d, ceil_mode)
    if squeeze:
        out, ind = out.squeeze(0), ind.squeeze(0)
    return (out, ind) if return_indices else out


def avg_pool2d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Mean over sliding windows (torch.nn.functional.avg_pool2d): zero padding counts in the
    divisor unless count_include_pad=False; divisor_override replaces the divisor."""
    x, squeeze = _as_4d("avg_pool2d", input)
    k, s, p, d = _pool_args("avg_pool2d", kernel_size, stride, padding)
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise ValueError(
            f"avg_pool2d(): padding should be at most half of the kernel size, got padding={p} "
            f"and kernel_size={k}"
        )
    if divisor_override is not None and divisor_override == 0:
        raise ValueError("avg_pool2d(): divisor_override must be non-zero")
    if (
        # a captured graph keeps the composition (the runtime lowers it)
        (CAPTURE[0] is None or not capturing())
        and x._dev is None
        and x.dtype.is_floating_point
        and x.dtype.itemsize >= 4
        and (divisor_override is None or divisor_override > 0)
    ):
        # host float32 / float64: one C pass per plane each way (gpucore/ops/pool.py)
        out = _pool.avg_pool2d(x, k, s, p, ceil_mode, count_include_pad, divisor_override or 0)
        return out.squeeze(0) if squeeze else out
    n, c, h, w = x.shape
    cols, (oh, ow) = _pool_cols("avg_pool2d", x, k, s, p, d, ceil_mode)
    if divisor_override is not None:
        out = cols.sum(1) / divisor_override
    else:
        lo, hi = (
            ((0, 0), (h, w)) if not count_include_pad else ((-p[0], -p[1]), (h + p[0], w + p[1]))
        )
        mask = _window_mask(h, w, k, s, p, d, oh, ow, lo, hi)
        if mask is None:
            out = cols.mean(1)
        else:
            out = cols.sum(1) / _const(mask.sum(0), x.dtype)
    out = out.reshape(n, c, oh, ow)
    return out.squeeze(0) if squeeze else out


@functools.lru_cache(maxsize=256)
def _adaptive_bins(size: int, out: int):
    """0/1 matrix [out, size] of PyTorch's adaptive bins (floor(i*size/out) to
    ceil((i+1)*size/out)) and each bin's length [out, 1]."""
    m = np.zeros((out, size), np.int64)
    for i in range(out):
        m[i, (i * size) // out : -(-((i + 1) * size) // out)] = 1
    return m, m.sum(1, keepdims=True)


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Average over PyTorch's adaptive bins to an output of output_size (an int, or a pair whose
    entries may be None to keep that input size)."""
    x, squeeze = _as_4d("adaptive_avg_pool2d", input)
    n, c, h, w = x.shape
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 2:
            raise ValueError(
                f"adaptive_avg_pool2d(): output_size must be an int or a pair, got {output_size!r}"
            )
        oh, ow = (
            h if output_size[0] is None else operator.index(output_size[0]),
            w if output_size[1] is None else operator.index(output_size[1]),
        )
    else:
        oh = ow = operator.index(output_size)
    if oh < 1 or ow < 1:
        raise ValueError(f"adaptive_avg_pool2d(): output_size must be positive, got {(oh, ow)}")
    if h == 0 or w == 0:
        raise ShapeError(f"adaptive_avg_pool2d(): empty spatial input {tuple(input.shape)}")
    if (oh, ow) == (1, 1):
        out = x.mean((2, 3), keepdim=True)
    elif h % oh == 0 and w % ow == 0:
        out = x.reshape(n, c, oh, h // oh, ow, w // ow).mean((3, 5))
    else:
        mh, ch = _adaptive_bins(h, oh)
        mw, cw = _adaptive_bins(w, ow)
        ph = _const(mh, x.dtype) / _const(ch, x.dtype)  # [OH, H]
        pw = _const(mw, x.dtype) / _const(cw, x.dtype)  # [OW, W]
        out = ph.matmul(x).matmul(pw.t())
    return out.squeeze(0) if squeeze else out


def _as_3d(op: str, x) -> tuple:
    """[N, C, L] as [N, C, 1, L] (an unbatched [C, L] as [C, 1, L]), and the dim to drop."""
    _check_tensor(op, x)
    if x.ndim not in (2, 3):
        raise ShapeError(
            f"{op}(): expected a 2-D [C, L] or 3-D [N, C, L] input, got shape {tuple(x.shape)}"
        )
    return x.unsqueeze(-2), x.ndim - 1


def _pool1d_args(op, kernel_size, stride, padding, dilation=1):
    # a stride of None or () is the kernel size
    k = _single(kernel_size, op, "kernel_size", 1)
    empty = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    s = k if empty else _single(stride, op, "stride", 1)
    return (
        (1, k),
        (1, s),
        (0, _single(padding, op, "padding", 0)),
        (1, _single(dilation, op, "dilation", 1)),
    )


def max_pool1d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """Max over sliding windows of [N, C, L] (torch.nn.functional.max_pool1d): max_pool2d over
    a height of one; indices index L."""
    x, dim = _as_3d("max_pool1d", input)
    k, s, p, d = _pool1d_args("max_pool1d", kernel_size, stride, padding, dilation)
    out, ind = max_pool2d(x, k, s, p, d, ceil_mode, return_indices=True)
    out, ind = out.squeeze(dim), ind.squeeze(dim)
    return (out, ind) if return_indices else out


def avg_pool1d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """Mean over sliding windows of [N, C, L] (torch.nn.functional.avg_pool1d)."""
    x, dim = _as_3d("avg_pool1d", input)
    k, s, p, _ = _pool1d_args("avg_pool1d", kernel_size, stride, padding)
    return avg_pool2d(x, k, s, p, ceil_mode, count_include_pad).squeeze(dim)


def _out1(op, output_size) -> int:
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 1:
            raise ValueError(
                f"{op}(): output_size must be an int or a 1-tuple, got {output_size!r}"
            )
        output_size = output_size[0]
    return operator.index(output_size)


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """Average over PyTorch's adaptive bins of [N, C, L] to output_size."""
    x, dim = _as_3d("adaptive_avg_pool1d", input)
    out = adaptive_avg_pool2d(x, (1, _out1("adaptive_avg_pool1d", output_size)))
    return out.squeeze(dim)


@functools.lru_cache(maxsize=256)
def _bin_windows(size: int, out: int):
    """Each adaptive bin's input positions [out, K] (K the longest bin; shorter bins repeat
    their last position, which leaves a max unchanged) and each bin's start [out]."""
    start = (np.arange(out) * size) // out
    end = -(-((np.arange(out) + 1) * size) // out)
    k = int((end - start).max())
    pos = np.minimum(start[:, None] + np.arange(k)[None, :], end[:, None] - 1)
    return pos, start


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Max over PyTorch's adaptive bins to output_size (torch.nn.functional.adaptive_max_pool2d;
    entries may be None to keep that input size): the max over each bin's columns, then over its
    rows, so the gradient and the flat H*W index go to the first maximum in row-major order."""
    x, squeeze = _as_4d("adaptive_max_pool2d", input)
    n, c, h, w = x.shape
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 2:
            raise ValueError(
                f"adaptive_max_pool2d(): output_size must be an int or a pair, got {output_size!r}"
            )
        oh = h if output_size[0] is None else operator.index(output_size[0])
        ow = w if output_size[1] is None else operator.index(output_size[1])
    else:
        oh = ow = operator.index(output_size)
    if oh < 1 or ow < 1:
        raise ValueError(f"adaptive_max_pool2d(): output_size must be positive, got {(oh, ow)}")
    if h == 0 or w == 0:
        raise ShapeError(f"adaptive_max_pool2d(): empty spatial input {tuple(input.shape)}")
    pw, sw = _bin_windows(w, ow)
    ph, sh = _bin_windows(h, oh)
    cols = x.index_select(3, _const(pw.reshape(-1))).reshape(n, c, h, ow, pw.shape[1])
    vw, iw = cols.max(4)  # [N, C, H, OW]
    rows = vw.index_select(2, _const(ph.reshape(-1))).reshape(n, c, oh, ph.shape[1], ow)
    out, ih = rows.max(3)  # [N, C, OH, OW]
    if squeeze:
        out = out.squeeze(0)
    if not return_indices:
        return out
    hpos = ih + _const(sh.reshape(oh, 1))
    wpos = (iw + _const(sw)).gather(2, hpos)
    ind = hpos * w + wpos
    return out, (ind.squeeze(0) if squeeze else ind)


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """Max over PyTorch's adaptive bins of [N, C, L] (torch.nn.functional.adaptive_max_pool1d)."""
    x, dim = _as_3d("adaptive_max_pool1d", input)
    out, ind = adaptive_max_pool2d(
        x, (1, _out1("adaptive_max_pool1d", output_size)), return_indices=True
    )
    out, ind = out.squeeze(dim), ind.squeeze(dim)
    return (out, ind) if return_indices else out
