"""grid_sampler (torch.grid_sampler, the op under F.grid_sample) and its backward.

grid_sampler(x, grid) takes x [N, C, *in] (in: [H, W] or [D, H, W]) and grid [N, *out, nd] (nd
= 2 or 3, coordinate 0 along W, in [-1, 1]) with attrs mode ('bilinear', 'nearest', 'bicubic'),
padding_mode ('zeros', 'border', 'reflection') and align_corners, and returns [N, C, *out].
grid_sampler_backward(g, x, grid, need=(input?, grid?)) gives both gradients in one pass
(empty where not needed; the grid's are zeros for 'nearest'). Double backward raises, as in
PyTorch (its grid_sampler_2d_backward has no derivative).

kernels: backends/cpu/kernels/grid_sample.py (cpu/grid_sample.c). Device tensors run
gpucore.nn.functional.grid's composition instead.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from .registry import apply, defop
from .samples import Sample, uniform

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")


def _infer(x, grid, mode, padding_mode, align_corners):
    nd = x.ndim - 2
    if (
        nd not in (2, 3)
        or grid.ndim != x.ndim
        or grid.shape[-1] != nd
        or grid.shape[0] != x.shape[0]
    ):
        raise ShapeError(
            f"grid_sampler: input {tuple(x.shape)} and grid {tuple(grid.shape)} must be "
            f"[N, C, *in] and [N, *out, {max(nd, 0)}] with 2 or 3 spatial dims"
        )
    if not x.dtype.is_floating_point or grid.dtype is not x.dtype:
        raise DTypeError(
            f"grid_sampler: input and grid must be one floating point dtype, got {x.dtype} and "
            f"{grid.dtype}"
        )
    if mode not in MODES or padding_mode not in PADDINGS or (mode == "bicubic" and nd != 2):
        raise ValueError(f"grid_sampler: unsupported mode {mode!r} / padding {padding_mode!r}")
    return (tuple(x.shape[:2]) + tuple(grid.shape[1:-1]), x.dtype)


def _attrs(a: dict) -> dict:
    return {k: a[k] for k in ("mode", "padding_mode", "align_corners")}


def _bwd(ctx, g):
    x, grid = ctx.saved
    need = tuple(bool(n) for n in ctx.needs_input_grad[:2])
    gx, ggrid = apply(
        GRID_SAMPLER_BACKWARD, g.contiguous(), x, grid, need=need, **_attrs(ctx.attrs)
    )
    return (gx if need[0] else None, ggrid if need[1] else None)


# ----------------------------------------------------------------------------- reference
def _src(v, size, padding_mode, align, integer=False):
    """PyTorch's source index of coordinates v (unnormalised unless integer, then padded)."""
    if not integer:
        v = (v + 1) / 2 * (size - 1) if align else ((v + 1) * size - 1) / 2
    if padding_mode == "border":
        v = np.clip(v, 0, size - 1)
    elif padding_mode == "reflection":
        lo, hi = (0, 2 * (size - 1)) if align else (-1, 2 * size - 1)
        if lo == hi:
            v = np.zeros_like(v)
        else:
            span, m = (hi - lo) / 2, lo / 2
            a = np.abs(v - m)
            extra, flips = np.fmod(a, span), np.floor(a / span)
            v = np.clip(np.where(flips % 2 == 0, extra + m, span - extra + m), 0, size - 1)
    return v


def _cubic(t):
    a = -0.75
    x1, x2, x3 = t + 1, 1 - t, 2 - t
    return [
        ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a,
        ((a + 2) * t - (a + 3)) * t * t + 1,
        ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1,
        ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a,
    ]


def np_grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    """float64 numpy reference, point by point over flattened planes (PyTorch's formulas)."""
    n, c = x.shape[:2]
    sizes = x.shape[2:]
    nd = len(sizes)
    pts = grid.reshape(n, -1, nd)
    flat = x.reshape(n, c, -1)
    strides = [int(np.prod(sizes[nd - k :])) for k in range(nd)]  # along coordinate k
    dims = [sizes[nd - 1 - k] for k in range(nd)]
    out = np.zeros((n, c, pts.shape[1]))

    def take(b, idx, w):  # idx: per coordinate integer positions (arrays over points)
        ok = np.ones_like(w, bool)
        off = np.zeros(w.shape, np.int64)
        for k in range(nd):
            ok &= (idx[k] >= 0) & (idx[k] < dims[k])
            off += np.where(ok, idx[k], 0).astype(np.int64) * strides[k]
        return flat[b][:, np.where(ok, off, 0)] * np.where(ok, w, 0)

    for b in range(n):
        if mode == "bicubic":
            ix, iy = (
                (pts[b, :, k] + 1) / 2 * (dims[k] - 1)
                if align_corners
                else ((pts[b, :, k] + 1) * dims[k] - 1) / 2
                for k in range(2)
            )
            fx, fy = np.floor(ix), np.floor(iy)
            wx, wy = _cubic(ix - fx), _cubic(iy - fy)
            for i in range(4):
                for j in range(4):
                    px = _src(fx - 1 + i, dims[0], padding_mode, align_corners, True)
                    py = _src(fy - 1 + j, dims[1], padding_mode, align_corners, True)
                    px = np.where((px >= 0) & (px < dims[0]), np.trunc(px), -1)
                    py = np.where((py >= 0) & (py < dims[1]), np.trunc(py), -1)
                    out[b] += take(b, [px, py], wx[i] * wy[j])
            continue
        src = [_src(pts[b, :, k], dims[k], padding_mode, align_corners) for k in range(nd)]
        if mode == "nearest":
            out[b] = take(b, [np.rint(s) for s in src], np.ones(pts.shape[1]))
            continue
        lo = [np.floor(s) for s in src]
        for corner in range(1 << nd):
            bits = [(corner >> k) & 1 for k in range(nd)]
            w = np.ones(pts.shape[1])
            for k in range(nd):
                fr = src[k] - lo[k]
                w = w * (fr if bits[k] else 1 - fr)
            out[b] += take(b, [lo[k] + bits[k] for k in range(nd)], w)
    return out.reshape((n, c) + grid.shape[1:-1])


# (input shape, grid's out shape, mode, padding, align_corners)
_GEOMS = [
    ((2, 3, 5, 6), (4, 3), "bilinear", "zeros", False),
    ((1, 2, 4, 5), (3, 3), "bilinear", "border", True),
    ((1, 2, 5, 4), (3, 4), "bilinear", "reflection", False),
    ((1, 2, 4, 4), (3, 3), "bilinear", "reflection", True),
    ((2, 2, 5, 6), (3, 4), "nearest", "zeros", False),
    ((1, 2, 5, 6), (3, 4), "nearest", "reflection", True),
    ((2, 2, 5, 6), (3, 3), "bicubic", "zeros", False),
    ((1, 2, 5, 6), (3, 3), "bicubic", "border", True),
    ((1, 2, 5, 6), (3, 3), "bicubic", "reflection", False),
    ((2, 2, 3, 4, 5), (2, 3, 2), "bilinear", "zeros", False),
    ((1, 2, 3, 4, 4), (2, 2, 3), "bilinear", "reflection", True),
    ((1, 2, 3, 4, 5), (2, 3, 2), "nearest", "border", False),
]


def _samples(backward=False):
    out = []
    for i, (shape, osz, mode, pad, align) in enumerate(_GEOMS):
        x = uniform(*shape, seed=i)
        grid = uniform(shape[0], *osz, len(shape) - 2, low=-1.3, high=1.3, seed=i + 50)
        attrs = {"mode": mode, "padding_mode": pad, "align_corners": align}
        # finite differences need points away from the kinks (pixel centres, borders)
        grad = mode != "nearest" and pad == "zeros"
        if not backward:
            out.append(Sample(x, grid, ref=np_grid_sample, grad=grad, atol=1e-4, **attrs))
            continue
        g = uniform(*(shape[:2] + osz), seed=i + 90)
        out.append(
            Sample(
                g,
                x,
                grid,
                need=(True, True),
                ref=_np_backward,
                grad=False,
                atol=1e-4,
                tol64=(1e-7, 1e-6),
                **attrs,
            )
        )
    return out


def _np_backward(g, x, grid, need, **attrs):
    """The adjoint in x (the forward is linear in x: one basis image at a time) and central
    differences in grid, both of <g, grid_sample(x, grid)>."""
    gx = np.zeros(x.size)
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = 1
        gx[j] = (g * np_grid_sample(e.reshape(x.shape), grid, **attrs)).sum()
    ggrid = np.zeros(grid.size)
    if attrs["mode"] != "nearest":
        h = 1e-6
        for j in range(grid.size):
            d = np.zeros(grid.size)
            d[j] = h
            d = d.reshape(grid.shape)
            hi = (g * np_grid_sample(x, grid + d, **attrs)).sum()
            lo = (g * np_grid_sample(x, grid - d, **attrs)).sum()
            ggrid[j] = (hi - lo) / (2 * h)
    return gx.reshape(x.shape), ggrid.reshape(grid.shape)


GRID_SAMPLER = defop(
    "grid_sampler",
    infer=_infer,
    save_inputs=(0, 1),
    backward=_bwd,
    samples=_samples,
)


def _backward_infer(g, x, grid, need, **attrs):
    want = _infer(x, grid, **attrs)[0]
    if tuple(g.shape) != want or g.dtype is not x.dtype:
        raise ShapeError(f"grid_sampler_backward: grad {tuple(g.shape)} must be {want}")
    return [
        (tuple(x.shape) if need[0] else (0,), x.dtype),
        (tuple(grid.shape) if need[1] else (0,), x.dtype),
    ]


def _no_double_backward(ctx, *grads):
    raise NotImplementedError(
        "grid_sampler_backward: double backward is not implemented (nor in PyTorch): the "
        "gradients of grid_sample cannot be differentiated again"
    )


GRID_SAMPLER_BACKWARD = defop(
    "grid_sampler_backward",
    infer=_backward_infer,
    backward=_no_double_backward,
    samples=lambda: _samples(backward=True),
)


def grid_sampler(x, grid, mode: str, padding_mode: str, align_corners: bool):
    """The fused op on contiguous inputs (gpucore.nn.functional.grid_sample validates the
    arguments and decides when to use it)."""
    return apply(
        GRID_SAMPLER,
        x.contiguous(),
        grid.contiguous(),
        mode=mode,
        padding_mode=padding_mode,
        align_corners=bool(align_corners),
    )
