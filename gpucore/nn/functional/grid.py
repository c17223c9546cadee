"""Spatial transformer sampling: affine_grid (a constant base grid times theta, a composition)
and grid_sample (bilinear / nearest / bicubic, padding zeros / border / reflection,
align_corners; 4-D and 5-D for bilinear and nearest).

grid_sample on host float tensors runs the fused op gpucore.ops.grid_sample (forward and
backward in C, cpu/grid_sample.c); device tensors, captured graphs and other dtypes run
``grid_sample_composed``, the same formulas as differentiable ops (gathers of the corner pixels
weighted by the fractional parts), whose gradients match the C kernel's: each coordinate
transform's derivative is PyTorch's (0 where a border clips, the sign of a reflection).
"""

from __future__ import annotations

import functools
import math
import operator

import numpy as np

from ... import _caller_warnings as caller_warnings
from ... import dtypes as D
from ...creation import fused_linspace
from ...errors import DTypeError, ShapeError
from ...ops import grid_sample as _gs
from ...ops.elementwise import where
from ...ops.registry import capturing
from ...tensor import Tensor
from ._utils import _check_tensor, _const

_ALIGN_WARNING = (
    "Default grid_sample and affine_grid behavior has changed to align_corners=False since "
    "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
    "documentation of grid_sample for details."
)


# ----------------------------------------------------------------------------- affine_grid
@functools.lru_cache(maxsize=128)
def _base_grid(spatial: tuple, align_corners: bool, dtype: type = np.float64) -> np.ndarray:
    """[prod(spatial), nd + 1]: each output position's (x, y[, z], 1), PyTorch's
    linspace_from_neg_one per dim (0 for a dim of size 1), in ``dtype`` with its rounding (its
    linspace's fused steps from both ends: creation.fused_linspace), then ``* (n - 1) / n`` without
    align_corners. A coordinate one ulp off flips mode='nearest' picks at pixel-centre ties (and
    grid_sample's results with them)."""

    def lin(n):
        if n <= 1:
            return np.zeros(max(n, 1), dtype)
        r = fused_linspace(-1.0, 1.0, n, D.float64 if dtype is np.float64 else D.float32)
        return r if align_corners else r * dtype(n - 1) / dtype(n)

    axes = [lin(s) for s in spatial]  # along D, H, W (or H, W)
    mesh = np.meshgrid(*axes, indexing="ij")
    cols = [m.reshape(-1) for m in reversed(mesh)]  # x (W) first
    return np.stack(cols + [np.ones(int(np.prod(spatial)), dtype)], axis=1)


def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """Sampling grids [N, H, W, 2] (or [N, D, H, W, 3]) of the affine maps theta [N, 2, 3]
    ([N, 3, 4]) for an output of ``size`` [N, C, H, W] ([N, C, D, H, W]), as
    torch.nn.functional.affine_grid: grid = base @ theta^T, base the output's normalised
    coordinates in [-1, 1] (pixel centres unless align_corners). Differentiable in theta."""
    if align_corners is None:
        caller_warnings.warn(_ALIGN_WARNING)
        align_corners = False
    if not isinstance(theta, Tensor):
        raise TypeError(
            f"affine_grid(): theta must be a gpucore Tensor, got {type(theta).__name__}"
        )
    if not theta.dtype.is_floating_point:
        raise ValueError(
            f"affine_grid(): Expected theta to have floating point type, but got {theta.dtype}"
        )
    try:
        size = tuple(operator.index(s) for s in size)
    except TypeError:
        raise TypeError(f"affine_grid(): size must be a sequence of ints, got {size!r}") from None
    if len(size) not in (4, 5):
        raise NotImplementedError(
            "affine_grid(): only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
            f"respectively. Got size {size}."
        )
    nd = len(size) - 2
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (nd, nd + 1):
        raise ValueError(
            f"affine_grid(): Expected a batch of {nd}D affine matrices of shape "
            f"Nx{nd}x{nd + 1} for size {size}. Got {tuple(theta.shape)}."
        )
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        caller_warnings.warn(
            "Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
            "align_corners=True. This is not an intended use case of affine_grid. See the "
            "documentation of affine_grid for details.",
        )
    elif min(size) <= 0:
        raise ValueError(f"affine_grid(): Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise ShapeError(
            f"affine_grid(): theta has {theta.shape[0]} matrices but size asks for a batch of "
            f"{size[0]}"
        )
    wide = np.float64 if theta.dtype is D.float64 else np.float32  # PyTorch's grid dtype
    base = _const(_base_grid(spatial, bool(align_corners), wide), theta.dtype, device=theta.device)
    grid = base.matmul(theta.transpose(1, 2))  # [N, P, nd]
    return grid.reshape((size[0],) + spatial + (nd,))


# ----------------------------------------------------------------------------- grid_sample
def _unnormalize(v: Tensor, size: int, align: bool) -> Tensor:
    return (v + 1) * ((size - 1) / 2) if align else ((v + 1) * size - 1) / 2


def _clip(v: Tensor, size: int) -> Tensor:
    """clamp to [0, size - 1] with PyTorch's gradient: 0 on (and beyond) the bounds."""
    inside = (v > 0) & (v < size - 1)
    return where(inside, v, v.detach().clamp(0, size - 1))


def _reflect(v: Tensor, twice_low: int, twice_high: int) -> Tensor:
    if twice_low == twice_high:
        return v * 0
    m, span = twice_low / 2, (twice_high - twice_low) / 2
    a = (v - m).abs()
    flips = (a.detach() / span).floor()
    extra = a - flips * span  # fmod(a, span): its gradient is a's
    even = (flips - (flips / 2).floor() * 2) == 0
    return where(even, extra + m, span - extra + m)


def _pad(v: Tensor, size: int, padding_mode: str, align: bool) -> Tensor:
    if padding_mode == "border":
        return _clip(v, size)
    if padding_mode == "reflection":
        lo, hi = (0, 2 * (size - 1)) if align else (-1, 2 * size - 1)
        return _clip(_reflect(v, lo, hi), size)
    return v


def _finite(v: Tensor) -> Tensor:
    """A non-finite (or beyond 1e15) coordinate is -100, as in the C kernel."""
    d = v.detach()
    return where(d.isfinite() & (d.abs() <= 1e15), v, d * 0 - 100)


def _cubic(t: Tensor) -> list:
    a = -0.75
    x1, x2, x3 = t + 1, 1 - t, 2 - t
    return [
        ((x1 * a - 5 * a) * x1 + 8 * a) * x1 - 4 * a,
        ((a + 2) * t - (a + 3)) * t * t + 1,
        ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1,
        ((x3 * a - 5 * a) * x3 + 8 * a) * x3 - 4 * a,
    ]


def grid_sample_composed(
    input: Tensor, grid: Tensor, mode: str, padding_mode: str, align_corners: bool
) -> Tensor:
    """grid_sample as differentiable ops (any backend): per tap a gather of the input's flat
    planes at the tap's in-bounds position, times its weight (zero outside)."""
    n, c = input.shape[:2]
    sizes = tuple(input.shape[2:])
    nd = len(sizes)
    out_sp = tuple(grid.shape[1:-1])
    p = math.prod(out_sp)
    pts = grid.reshape(n, p, nd)
    flat = input.reshape(n, c, math.prod(sizes))
    dims = [sizes[nd - 1 - k] for k in range(nd)]  # along coordinate k (0: W)
    strides = [math.prod(sizes[nd - k :]) for k in range(nd)]
    coords = [pts[:, :, k] for k in range(nd)]

    def tap(pos: list, w: Tensor) -> Tensor:
        """flat[:, :, position] * w, zero where a position falls outside (pos: float [n, p],
        whole numbers, no gradient)."""
        ok = None
        for k in range(nd):
            inb = (pos[k] >= 0) & (pos[k] < dims[k])
            ok = inb if ok is None else ok & inb
        off = None
        for k in range(nd):
            term = where(ok, pos[k], 0).to(D.int64) * strides[k]
            off = term if off is None else off + term
        vals = flat.gather(2, off.unsqueeze(1).expand(n, c, p))
        return vals * (w * ok.to(w.dtype)).unsqueeze(1)

    out = None
    if mode == "bicubic":
        ix, iy = (_finite(_unnormalize(coords[k], dims[k], align_corners)) for k in range(2))
        fx, fy = ix.detach().floor(), iy.detach().floor()
        wx, wy = _cubic(ix - fx), _cubic(iy - fy)
        for j in range(4):
            py = _pad(fy + (j - 1), dims[1], padding_mode, align_corners)
            py = where((py >= 0) & (py < dims[1]), py.trunc(), py * 0 - 1)
            for i in range(4):
                px = _pad(fx + (i - 1), dims[0], padding_mode, align_corners)
                px = where((px >= 0) & (px < dims[0]), px.trunc(), px * 0 - 1)
                t = tap([px, py], wx[i] * wy[j])
                out = t if out is None else out + t
        return out.reshape((n, c) + out_sp)
    src = [
        _finite(
            _pad(
                _unnormalize(coords[k], dims[k], align_corners),
                dims[k],
                padding_mode,
                align_corners,
            )
        )
        for k in range(nd)
    ]
    if mode == "nearest":
        # the weight is 1 with a zero gradient, so grid.grad is zeros as PyTorch's
        one = src[0] * 0 + 1
        out = tap([s.detach().round() for s in src], one)
        return out.reshape((n, c) + out_sp)
    lo = [s.detach().floor() for s in src]
    fr = [s - f for s, f in zip(src, lo)]
    for corner in range(1 << nd):
        w = None
        pos = []
        for k in range(nd):
            up = (corner >> k) & 1
            wk = fr[k] if up else 1 - fr[k]
            w = wk if w is None else w * wk
            pos.append(lo[k] + up)
        t = tap(pos, w)
        out = t if out is None else out + t
    return out.reshape((n, c) + out_sp)


def grid_sample(
    input: Tensor,
    grid: Tensor,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
) -> Tensor:
    """Sample input [N, C, H, W] ([N, C, D, H, W]) at grid [N, Ho, Wo, 2] ([N, Do, Ho, Wo, 3])
    of normalised coordinates (x along W first; -1 and 1 the outer edges, or the corner pixel
    centres with align_corners), as torch.nn.functional.grid_sample. mode 'bilinear' (trilinear
    for 5-D), 'nearest' or 'bicubic' (4-D only); padding_mode 'zeros', 'border' or
    'reflection'. Differentiable in input and grid (once, as PyTorch)."""
    if mode not in _gs.MODES:
        raise ValueError(
            "grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: "
            f"'{mode}'"
        )
    if padding_mode not in _gs.PADDINGS:
        raise ValueError(
            "grid_sample(): expected padding_mode to be 'zeros', 'border', or 'reflection', but "
            f"got: '{padding_mode}'"
        )
    if align_corners is None:
        caller_warnings.warn(_ALIGN_WARNING)
        align_corners = False
    _check_tensor("grid_sample", input)
    _check_tensor("grid_sample", grid, "grid")
    if grid.dtype is not input.dtype:
        raise DTypeError(
            f"grid_sample(): input and grid must have the same dtype, got {input.dtype} and "
            f"{grid.dtype}"
        )
    shapes = f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
    if input.ndim not in (4, 5) or grid.ndim != input.ndim:
        raise ShapeError(
            f"grid_sample(): expected 4D or 5D input and grid with same number of dimensions, "
            f"but got {shapes}"
        )
    if grid.shape[0] != input.shape[0]:
        raise ShapeError(
            f"grid_sample(): expected grid and input to have same batch size, but got {shapes}"
        )
    if grid.shape[-1] != input.ndim - 2:
        raise ShapeError(
            f"grid_sample(): expected grid to have size {input.ndim - 2} in last dimension, "
            f"but got {shapes}"
        )
    if any(s == 0 for s in input.shape[2:]):
        raise ShapeError(
            f"grid_sample(): expected input to have non-empty spatial dimensions, but got {shapes}"
        )
    if mode == "bicubic" and input.ndim != 4:
        raise ShapeError("grid_sample(): bicubic interpolation only supports 4D input")
    host = input._dev is None and grid._dev is None and not capturing()
    if host and input.dtype in (D.float32, D.float64):
        return _gs.grid_sampler(input, grid, mode, padding_mode, align_corners)
    if host:  # float16 / bfloat16: the C kernel in float32
        out = _gs.grid_sampler(input.float(), grid.float(), mode, padding_mode, align_corners)
        return out.to(input.dtype)
    return grid_sample_composed(input, grid, mode, padding_mode, bool(align_corners))
