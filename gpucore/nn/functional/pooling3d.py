"""3-D pooling: max_pool3d, avg_pool3d, adaptive_avg_pool3d and adaptive_max_pool3d, each the
2-D pool over (H, W) of every depth plane ([N, C*D, H, W]) followed by a reduction along the
depth.

- max_pool3d / adaptive_max_pool3d: the depth tap of each window chosen as PyTorch's scan in
  (d, h, w) order picks it (the first maximum; the last NaN), then that plane's 2-D maximum
  selected, so the gradient goes to one input element per window, as PyTorch's.
- avg_pool3d / adaptive_avg_pool3d: PyTorch's divisors are products over the dims, so the 2-D
  average of each plane times a constant [OD, D] matrix (each window's depth taps over its
  depth divisor) is the 3-D average.

Geometry constants are built once per shape and cached.
"""

from __future__ import annotations

import functools
import operator

import numpy as np

from ...errors import ShapeError
from ...ops import pool as _pool
from ...ops.elementwise import where
from ...ops.joining import stack
from ...tensor import Tensor
from ._utils import _const
from .conv3d import _as_5d, _triple
from .padding import pad as _pad
from .pooling import (
    _adaptive_bins,
    _bin_windows,
    adaptive_avg_pool2d,
    adaptive_max_pool2d,
    avg_pool2d,
    max_pool2d,
)


def _args3d(op, kernel_size, stride, padding, dilation=1):
    k = _triple(kernel_size, op, "kernel_size", 1)
    empty = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    s = k if empty else _triple(stride, op, "stride", 1)
    return k, s, _triple(padding, op, "padding", 0), _triple(dilation, op, "dilation", 1)


@functools.lru_cache(maxsize=512)
def _depth_taps(size: int, k: int, s: int, p: int, d: int, o: int) -> np.ndarray:
    """bool [k, o]: which of each window's input depths lie inside the input."""
    pos = np.arange(o)[None, :] * s - p + np.arange(k)[:, None] * d
    return (pos >= 0) & (pos < size)


def _planes(x: Tensor) -> Tensor:
    n, c, d, h, w = x.shape
    return x.reshape(n, c * d, h, w)


def max_pool3d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """Max over sliding windows of [N, C, D, H, W] (torch.nn.functional.max_pool3d); padding
    counts as -inf.

    The gradient goes to the first maximum of each window in (d, h, w) order (a NaN wins, the
    window's last NaN, as PyTorch), summed where windows overlap. With return_indices, also the
    flat index into D*H*W of each maximum.
    """
    x, squeeze = _as_5d("max_pool3d", input)
    k, s, p, dl = _args3d("max_pool3d", kernel_size, stride, padding, dilation)
    for i in range(3):
        if p[i] > (dl[i] * (k[i] - 1) + 1) // 2:
            raise ValueError(
                f"max_pool3d(): padding should be at most half of the effective kernel size, "
                f"got padding={p}, kernel_size={k} and dilation={dl}"
            )
    n, c, d, h, w = x.shape
    od = _pool.pool_out("max_pool3d", d, k[0], s[0], p[0], dl[0], ceil_mode)[0]
    inside = _depth_taps(d, k[0], s[0], p[0], dl[0], od)
    if not inside.any(0).all():
        raise ShapeError(
            f"max_pool3d(): a window lies entirely in the padding (input {tuple(input.shape)}, "
            f"kernel {k}, stride {s}, padding {p}, dilation {dl})"
        )
    y, ind = max_pool2d(_planes(x), k[1:], s[1:], p[1:], dl[1:], ceil_mode, return_indices=True)
    oh, ow = y.shape[2:]
    y = y.reshape(n, c, d, oh, ow)
    # each window's kd depth taps: strided slices of the planes' maxima padded along the depth
    # (the padding, and the ceil_mode windows' end, never chosen)
    end = max(0, (od - 1) * s[0] + dl[0] * (k[0] - 1) + 1 - (d + p[0]))
    yp = _pad(y, (0, 0, 0, 0, p[0], end), value=float("-inf")) if p[0] or end else y
    span = (od - 1) * s[0] + 1
    slices = [yp[:, :, t * dl[0] : t * dl[0] + span : s[0]] for t in range(k[0])]
    pos = np.arange(od)[None, :] * s[0] - p[0] + np.arange(k[0])[:, None] * dl[0]
    ind = ind.reshape(n, c, d, oh, ow)
    out, index = _pick_depth(slices, inside, pos, ind, h * w, return_indices)
    if not return_indices:
        return out.squeeze(0) if squeeze else out
    return (out.squeeze(0), index.squeeze(0)) if squeeze else (out, index)


def _pick_depth(slices: list, inside, pos, ind: Tensor, hw: int, indices: bool) -> tuple:
    """Each window's value among its K depth candidates ``slices`` ([N, C, OD, OH, OW] each, the
    planes' 2-D maxima at the window's K depths ``pos`` [K, OD]; ``inside`` [K, OD] marks the real
    ones), as PyTorch's scan in (d, h, w) order picks it: the first maximum, or the last NaN.
    Returns (values, the flat D*H*W indices (``ind``: the planes' H*W ones), or None)."""
    kk = len(slices)
    # the choice is only compared, so no gradient flows through it (and not detached: a trace
    # would take a detached value for a constant)
    cand = stack(slices, 2)  # [N, C, K, OD, OH, OW]
    valid = _const(inside.reshape(kk, -1, 1, 1))
    isnan = cand != cand
    best = where(isnan, float("-inf"), cand).amax(2, keepdim=True)  # the max of the non-NaNs
    taps = _const(np.arange(kk, dtype=np.float32).reshape(kk, 1, 1, 1), cand.dtype)
    first = where((cand == best) & valid, taps, float(kk)).amin(2)
    last_nan = where(isnan, taps, -1.0).amax(2)
    tap = where(last_nan >= 0, last_nan, first)  # [N, C, OD, OH, OW]
    # the chosen slice's value (a where per tap: elementwise backwards, cheaper than a gather's)
    out = slices[0]
    for t in range(1, kk):
        out = where(tap == t, slices[t], out)
    if not indices:
        return out, None
    # the depths in float32 (exact to 2**24, where bfloat16 would not be past 256)
    at = [_const(pos[t].reshape(-1, 1, 1).astype(np.float32)) for t in range(kk)]
    depth = at[0].expand(*tap.shape)  # at full shape, also for a single tap
    for t in range(1, kk):
        depth = where(tap == t, at[t], depth)
    depth = depth.to(ind.dtype)
    return out, depth * hw + ind.gather(2, depth)


@functools.lru_cache(maxsize=512)
def _depth_matrix(size, k, s, p, o, include_pad, override):
    """[o, size]: each window's in-input depth taps over its depth divisor (PyTorch's: the
    window clipped to the padded input with count_include_pad, else to the input; 1 with a
    divisor_override, applied once in full afterwards)."""
    m = np.zeros((o, size))
    for i in range(o):
        start = i * s - p
        end = min(start + k, size + p)
        lo, hi = max(start, 0), min(end, size)
        div = 1 if override else (end - start if include_pad else hi - lo)
        m[i, lo:hi] = 1.0 / div
    return m


def avg_pool3d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Mean over sliding windows of [N, C, D, H, W] (torch.nn.functional.avg_pool3d): zero
    padding counts in the divisor unless count_include_pad=False; divisor_override replaces it."""
    x, squeeze = _as_5d("avg_pool3d", input)
    k, s, p, _ = _args3d("avg_pool3d", kernel_size, stride, padding)
    if any(p[i] > k[i] // 2 for i in range(3)):
        raise ValueError(
            f"avg_pool3d(): padding should be at most half of the kernel size, got padding={p} "
            f"and kernel_size={k}"
        )
    if divisor_override is not None and divisor_override == 0:
        raise ValueError("avg_pool3d(): divisor_override must be non-zero")
    n, c, d, h, w = x.shape
    od = _pool.pool_out("avg_pool3d", d, k[0], s[0], p[0], 1, ceil_mode)[0]
    override = divisor_override is not None
    # each plane's 2-D mean (or its sum, when the divisor is overridden)
    y = avg_pool2d(
        _planes(x), k[1:], s[1:], p[1:], ceil_mode, count_include_pad, 1 if override else None
    )
    oh, ow = y.shape[2:]
    m = _depth_matrix(d, k[0], s[0], p[0], od, count_include_pad, override)
    out = _const(m, x.dtype).matmul(y.reshape(n, c, d, oh * ow)).reshape(n, c, od, oh, ow)
    if override:
        out = out / divisor_override
    return out.squeeze(0) if squeeze else out


def _adaptive_size(op: str, output_size, dims: tuple) -> list:
    """The output [OD, OH, OW] of an adaptive pool: an int, or a triple of ints or None (keep
    that input size); the input's spatial dims must not be empty."""
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 3:
            raise ValueError(f"{op}(): output_size must be an int or a triple, got {output_size!r}")
        size = [dim if v is None else operator.index(v) for v, dim in zip(output_size, dims)]
    else:
        size = [operator.index(output_size)] * 3
    if min(size) < 1:
        raise ValueError(f"{op}(): output_size must be positive, got {tuple(size)}")
    if 0 in dims:
        raise ShapeError(f"{op}(): empty spatial input of spatial size {tuple(dims)}")
    return size


def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Average over PyTorch's adaptive bins of [N, C, D, H, W] to output_size (an int, or a
    triple whose entries may be None to keep that input size)."""
    x, squeeze = _as_5d("adaptive_avg_pool3d", input)
    n, c, d, h, w = x.shape
    size = _adaptive_size("adaptive_avg_pool3d", output_size, (d, h, w))
    y = adaptive_avg_pool2d(_planes(x), tuple(size[1:]))
    mask, count = _adaptive_bins(d, size[0])
    pd = _const(mask / count, x.dtype)  # [OD, D]
    out = pd.matmul(y.reshape(n, c, d, size[1] * size[2])).reshape(n, c, *size)
    return out.squeeze(0) if squeeze else out


def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """Max over PyTorch's adaptive bins of [N, C, D, H, W] to output_size
    (torch.nn.functional.adaptive_max_pool3d; an int, or a triple whose entries may be None to
    keep that input size): adaptive_max_pool2d of every depth plane, then each depth bin's
    plane chosen as PyTorch's scan picks it; return_indices gives flat D*H*W indices."""
    x, squeeze = _as_5d("adaptive_max_pool3d", input)
    n, c, d, h, w = x.shape
    size = _adaptive_size("adaptive_max_pool3d", output_size, (d, h, w))
    y, ind = adaptive_max_pool2d(_planes(x), tuple(size[1:]), return_indices=True)
    y = y.reshape(n, c, d, size[1], size[2])
    pos = _bin_windows(d, size[0])[0].T  # [K, OD]: each bin's depths (short bins repeat)
    slices = [y.index_select(2, _const(pos[t])) for t in range(pos.shape[0])]
    ind = ind.reshape(n, c, d, size[1], size[2])
    inside = np.ones(pos.shape, bool)
    out, index = _pick_depth(slices, inside, pos, ind, h * w, return_indices)
    if not return_indices:
        return out.squeeze(0) if squeeze else out
    return (out.squeeze(0), index.squeeze(0)) if squeeze else (out, index)
