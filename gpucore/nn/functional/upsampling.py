"""interpolate (torch.nn.functional.interpolate): nearest and nearest-exact (an index_select per
spatial dim), linear/bilinear/trilinear (a blend of two index_selects per dim, separable), bicubic
(four weighted index_selects per dim, separable) and area (adaptive average pooling). Indices and
weights are built once per shape."""

from __future__ import annotations

import functools
import math
import operator

import numpy as np

from ... import _caller_warnings as caller_warnings
from ... import dtypes
from ...errors import ShapeError
from ...tensor import Tensor
from ._utils import _check_tensor, _const
from .pooling import adaptive_avg_pool2d

_LINEAR_MODES = {"linear": 3, "bilinear": 4, "trilinear": 5}
_INTERP_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "bicubic", "area")
_ALIGN_MODES = {**_LINEAR_MODES, "bicubic": 4}
_CUBIC_A = -0.75  # PyTorch's (and OpenCV's) cubic convolution coefficient


@functools.lru_cache(maxsize=256)
def _nearest_index(in_size: int, out_size: int, scale: float | None, exact: bool):
    # PyTorch computes the source index in float32 (1/scale_factor, or in/out); doing the same
    # keeps the picked pixel identical where dst * scale lands on an integer. Its 'nearest'
    # also maps equal and doubled sizes exactly, whatever the scale_factor.
    if not exact and out_size in (in_size, 2 * in_size):
        return np.arange(out_size, dtype=np.int64) * in_size // out_size
    s = np.float32(1.0 / scale) if scale else np.float32(in_size) / np.float32(out_size)
    dst = np.arange(out_size, dtype=np.float32)
    if exact:
        dst = dst + np.float32(0.5)
    src = np.floor(dst * s).astype(np.int64)
    return np.minimum(src, in_size - 1)


@functools.lru_cache(maxsize=256)
def _linear_weights(in_size: int, out_size: int, scale: float | None, align_corners: bool):
    """(i0, i1, lambda): each output blends input i0 (weight 1 - lambda) and i1 (lambda)."""
    dst = np.arange(out_size, dtype=np.float64)
    if align_corners:
        s = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
        src = dst * s
    else:
        s = 1.0 / scale if scale else in_size / out_size
        src = np.maximum((dst + 0.5) * s - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    i1 = np.minimum(i0 + 1, in_size - 1)
    return i0, i1, src - i0


@functools.lru_cache(maxsize=256)
def _cubic_weights(
    in_size: int, out_size: int, scale: float | None, align_corners: bool, dtype: type
) -> tuple[np.ndarray, np.ndarray]:
    """(idx, w), each [4, out_size]: output j is the sum over k of input idx[k, j] times w[k, j].

    The taps sit at floor(src) - 1 .. floor(src) + 2, clamped to the input (the edge pixel
    repeats); src is PyTorch's source coordinate, not clamped at 0 as the linear modes' is. Made
    in ``dtype`` (float32 for float32 and narrower inputs, float64 for float64), as PyTorch computes
    them (its opmath type), in its order of operations."""
    one, half, a = dtype(1), dtype(0.5), dtype(_CUBIC_A)
    dst = np.arange(out_size, dtype=dtype)
    if align_corners:
        s = dtype(in_size - 1) / dtype(out_size - 1) if out_size > 1 else dtype(0)
        src = s * dst
    else:
        s = dtype(1.0 / scale) if scale else dtype(in_size) / dtype(out_size)
        src = s * (dst + half) - half
    base = np.floor(src)
    t = src - base

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + one

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    w = np.stack([far(t + one), near(t), near(one - t), far((one - t) + one)]).astype(dtype)
    offsets = np.arange(-1, 3, dtype=np.int64)[:, None]
    idx = np.clip(base.astype(np.int64)[None, :] + offsets, 0, in_size - 1)
    return idx, w


def _per_dim(op: str, v, n: int, name: str) -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) != n:
            raise ValueError(
                f"{op}(): {name} must be a number or a sequence of {n} numbers for a "
                f"{n + 2}-D input, got {v!r}"
            )
        return tuple(v)
    return (v,) * n


def interpolate(
    input: Tensor,
    size=None,
    scale_factor=None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize the spatial dims of [N, C, *] as torch.nn.functional.interpolate.

    Give size (an int or one per spatial dim) or scale_factor (output = floor(input * scale)).
    mode: 'nearest' (PyTorch's floor(dst * scale) pick), 'nearest-exact', 'linear' (3-D),
    'bilinear' (4-D), 'trilinear' (5-D), 'bicubic' (4-D; cubic convolution with A = -0.75, the
    edge pixels repeated, no clamping of the result), with align_corners, or 'area' (4-D; adaptive
    average pooling).
    """
    _check_tensor("interpolate", input)
    if mode not in _INTERP_MODES:
        raise NotImplementedError(
            f"interpolate(): mode {mode!r} is not supported; use one of {', '.join(_INTERP_MODES)}"
        )
    if antialias:
        raise NotImplementedError("interpolate(): antialias=True is not supported")
    if align_corners is not None and mode not in _ALIGN_MODES:
        raise ValueError(
            "interpolate(): align_corners option can only be set with the interpolating modes: "
            "linear | bilinear | bicubic | trilinear"
        )
    if input.ndim not in (3, 4, 5):
        raise ShapeError(
            f"interpolate(): expected a 3-D, 4-D or 5-D input [N, C, *spatial], got shape "
            f"{tuple(input.shape)}"
        )
    if mode in _ALIGN_MODES and input.ndim != _ALIGN_MODES[mode]:
        raise NotImplementedError(
            f"interpolate(): got {input.ndim}D input, but {mode} mode needs "
            f"{_ALIGN_MODES[mode]}D input"
        )
    if mode == "area" and input.ndim != 4:
        raise NotImplementedError(f"interpolate(): got {input.ndim}D input, but area mode needs 4D")
    if (size is None) == (scale_factor is None):
        raise ValueError(
            "interpolate(): only one of size or scale_factor should be defined"
            if size is not None
            else "interpolate(): either size or scale_factor should be defined"
        )
    spatial = tuple(input.shape[2:])
    nd = len(spatial)
    if size is not None:
        out_size = tuple(operator.index(s) for s in _per_dim("interpolate", size, nd, "size"))
        scales = (None,) * nd
    else:
        scales = tuple(float(s) for s in _per_dim("interpolate", scale_factor, nd, "scale_factor"))
        if any(not s > 0 for s in scales):
            raise ValueError(f"interpolate(): scale_factor must be positive, got {scale_factor!r}")
        out_size = tuple(math.floor(n * s) for n, s in zip(spatial, scales))
        if recompute_scale_factor:
            scales = (None,) * nd
    if any(s <= 0 for s in out_size) or any(s == 0 for s in spatial):
        raise ShapeError(
            f"interpolate(): input spatial size {spatial} and output size {out_size} must be "
            "positive"
        )
    if mode == "area":
        return adaptive_avg_pool2d(input, out_size)
    if mode == "bicubic":
        return _bicubic(input, out_size, scales, bool(align_corners))
    out = input
    for i, (n, o, s) in enumerate(zip(spatial, out_size, scales)):
        d = 2 + i
        if mode in ("nearest", "nearest-exact"):
            idx = _nearest_index(n, o, s, mode == "nearest-exact")
            if n != o or (idx != np.arange(n)).any():
                out = out.index_select(d, _const(idx))
            continue
        if n == o and not s:
            continue  # every output pixel lands on its input pixel
        i0, i1, lam = _linear_weights(n, o, s, bool(align_corners))
        bshape = (o,) + (1,) * (out.ndim - 1 - d)
        lam_t = _const(lam.reshape(bshape), out.dtype)
        a = out.index_select(d, _const(i0))
        b = out.index_select(d, _const(i1))
        out = a + (b - a) * lam_t
    return out


def _bicubic(input: Tensor, out_size: tuple, scales: tuple, align_corners: bool) -> Tensor:
    """Separable: width, then height, each output the sum of its four weighted taps (within a few
    ulps of PyTorch's CPU kernel, which blends the 4x4 taps per output pixel)."""
    wdtype = np.float64 if input.dtype == dtypes.float64 else np.float32
    out = input
    for d in (3, 2):
        n, o, s = input.shape[d], out_size[d - 2], scales[d - 2]
        if n == o and not s:
            continue  # t = 0: the weights are exactly (0, 1, 0, 0)
        idx, w = _cubic_weights(n, o, s, align_corners, wdtype)
        bshape = (o,) + (1,) * (out.ndim - 1 - d)
        acc = None
        for k in range(4):
            term = out.index_select(d, _const(idx[k])) * _const(w[k].reshape(bshape), out.dtype)
            acc = term if acc is None else acc + term
        out = acc
    return out


def upsample(
    input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners=None
) -> Tensor:
    """Deprecated in PyTorch: interpolate (with a warning, as torch.nn.functional.upsample)."""
    caller_warnings.warn(
        "`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.",
    )
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated in PyTorch: interpolate(mode='nearest'), with a warning."""
    caller_warnings.warn(
        "`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
    )
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated in PyTorch: interpolate(mode='bilinear', align_corners=True), with a warning."""
    caller_warnings.warn(
        "`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
    )
    if isinstance(input, Tensor) and input.ndim != 4:
        raise ShapeError(
            f"upsample_bilinear(): expected a 4-D input [N, C, H, W], got shape "
            f"{tuple(input.shape)}"
        )
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
