"""Pooling ops: max_pool2d (values + int64 indices) and its backward, max_pool2d_backward.

max_pool2d takes [N, C, H, W] and attrs kernel/stride/padding/dilation (pairs), ceil_mode and src
(the input shape, for the backward); it returns values [N, C, OH, OW] and the flat index
``h*W + w`` of each window's maximum in its input plane (PyTorch's return_indices). Padding counts
as -inf; the maximum is the first one in window order (ki, kj); a NaN wins, the last NaN of the
window when there are several (PyTorch's ``val > max || isnan(val)`` scan).

max_pool2d_backward(grad, indices) scatters grad into zeros [N, C, H, W] at indices, summing where
windows overlap; its own backward gathers the incoming gradient at the indices, so double
backward works.

kernels: backends/cpu/kernels/pool.py (cpu/maxpool.c), backends/vulkan/kernels/pool.py
(shaders/pool.comp).
"""

from __future__ import annotations

import functools

import numpy as np

from .. import dtypes as D
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .registry import apply, defop
from .samples import Sample, uniform


def pool_out(op: str, size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> tuple:
    """(output size, extra rows/cols of padding needed at the end for ceil_mode) of one spatial
    axis, PyTorch's rule: with ceil_mode the last window must start inside the input or the left
    padding."""
    eff = d * (k - 1) + 1
    num = size + 2 * p - eff
    if ceil_mode:
        o = -(-num // s) + 1
        if (o - 1) * s >= size + p:
            o -= 1
    else:
        o = num // s + 1
    if num < 0 or o < 1:
        raise ShapeError(
            f"{op}(): input of spatial size {size} is too small for kernel size {k} with "
            f"padding {p} and dilation {d}"
        )
    return o, max(0, (o - 1) * s + eff - (size + 2 * p))


@functools.lru_cache(maxsize=512)
def _has_empty_window(size: int, k: int, s: int, p: int, d: int, o: int) -> bool:
    """Whether some window of this axis lies entirely in the padding (possible with dilation)."""
    return any(all(not 0 <= i * s - p + j * d < size for j in range(k)) for i in range(o))


def _geom(a: dict) -> dict:
    return {k: a[k] for k in ("kernel", "stride", "padding", "dilation")}


def _max_pool2d_infer(x, kernel, stride, padding, dilation, ceil_mode, src):
    if x.ndim != 4:
        raise ShapeError(f"max_pool2d: expects a 4-D [N, C, H, W] input, got {tuple(x.shape)}")
    if not x.dtype.is_floating_point:
        raise DTypeError(f"max_pool2d: expects a floating point input, got {x.dtype}")
    n, c, h, w = x.shape
    oh = pool_out("max_pool2d", h, kernel[0], stride[0], padding[0], dilation[0], ceil_mode)[0]
    ow = pool_out("max_pool2d", w, kernel[1], stride[1], padding[1], dilation[1], ceil_mode)[0]
    for ax, size, o in ((0, h, oh), (1, w, ow)):
        if _has_empty_window(size, kernel[ax], stride[ax], padding[ax], dilation[ax], o):
            raise ShapeError(
                f"max_pool2d: a window lies entirely in the padding (input {tuple(x.shape)}, "
                f"kernel {kernel}, stride {stride}, padding {padding}, dilation {dilation})"
            )
    return [((n, c, oh, ow), x.dtype), ((n, c, oh, ow), D.int64)]


def _max_pool2d_bwd(ctx, g):
    (indices,) = ctx.saved
    a = ctx.attrs
    return (apply(MAX_POOL2D_BACKWARD, g, indices, input_shape=a["src"], **_geom(a)),)


# ----------------------------------------------------------------------------- samples
def _np_pool_size(size, k, s, p, d, ceil_mode):
    num = size + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil_mode else num // s) + 1
    return o - 1 if ceil_mode and (o - 1) * s >= size + p else o


def _np_max_pool2d(x, kernel, stride, padding, dilation, ceil_mode=False, src=None):
    """PyTorch's scan of each window in (ki, kj) order: ``v > best or isnan(v)``."""
    n, c, h, w = x.shape
    oh, ow = (
        _np_pool_size(sz, *g, ceil_mode)
        for sz, g in zip((h, w), zip(kernel, stride, padding, dilation))
    )
    vals = np.full((n, c, oh, ow), -np.inf)
    idx = np.full((n, c, oh, ow), -1, np.int64)
    for i, j, ki, kj in np.ndindex(oh, ow, *kernel):
        r = i * stride[0] - padding[0] + ki * dilation[0]
        q = j * stride[1] - padding[1] + kj * dilation[1]
        if 0 <= r < h and 0 <= q < w:
            v = x[:, :, r, q]
            better = (v > vals[:, :, i, j]) | np.isnan(v)
            vals[:, :, i, j] = np.where(better, v, vals[:, :, i, j])
            idx[:, :, i, j] = np.where(better, r * w + q, idx[:, :, i, j])
    return vals, idx


def _np_max_pool2d_backward(g, indices, input_shape, kernel, stride, padding, dilation):
    n, c, h, w = input_shape
    out = np.zeros((n * c, h * w))
    planes = np.repeat(np.arange(n * c), indices[0, 0].size)
    np.add.at(out, (planes, indices.reshape(-1)), g.reshape(-1))  # overlapping windows sum
    return out.reshape(input_shape)


# (input shape, kernel, stride, padding, dilation, ceil_mode, gradient-checked)
_POOL_GEOMS = [
    ((1, 2, 5, 5), (2, 2), (2, 2), (0, 0), (1, 1), False, True),
    ((2, 1, 6, 7), (3, 3), (1, 1), (1, 1), (1, 1), False, True),  # overlapping
    ((1, 2, 7, 6), (2, 3), (2, 1), (1, 0), (2, 1), False, True),  # dilation
    ((1, 1, 5, 6), (2, 3), (2, 2), (0, 1), (1, 1), True, True),  # partial windows
    ((2, 3, 32, 32), (3, 3), (2, 2), (1, 1), (1, 1), False, False),
]


def _pool_samples(backward=False):
    """Max pooling (values + indices) on _POOL_GEOMS, ties (the first in window order wins) and
    NaN (the last NaN wins); its backward at the indices of the forward on random inputs."""
    out = []
    for i, (shape, k, s, p, d, ceil, grad) in enumerate(_POOL_GEOMS):
        geom = {"kernel": k, "stride": s, "padding": p, "dilation": d}
        x = uniform(*shape, seed=i)
        if backward:
            vals, idx = _np_max_pool2d(x, ceil_mode=ceil, **geom)
            out.append(
                Sample(
                    uniform(*vals.shape, seed=i + 10),
                    idx,
                    input_shape=shape,
                    ref=_np_max_pool2d_backward,
                    grad=grad,
                    **geom,
                )
            )
        else:
            out.append(Sample(x, ceil_mode=ceil, src=shape, ref=_np_max_pool2d, grad=grad, **geom))
    if not backward:
        geom = {
            "kernel": (3, 3),
            "stride": (1, 1),
            "padding": (1, 1),
            "dilation": (1, 1),
            "ceil_mode": False,
        }
        ties = np.round(uniform(1, 2, 6, 6, seed=20))
        nan = uniform(1, 1, 5, 5, seed=21)
        nan[0, 0, [0, 1, 1, 3], [1, 1, 2, 3]] = np.nan
        out += [
            Sample(ties, src=ties.shape, ref=_np_max_pool2d, grad=False, **geom),
            Sample(nan, src=nan.shape, ref=_np_max_pool2d, grad=False, **geom),
        ]
    return out


MAX_POOL2D = defop(
    "max_pool2d",
    infer=_max_pool2d_infer,
    save_outputs=(1,),
    backward=_max_pool2d_bwd,
    samples=_pool_samples,
)


def _max_pool2d_backward_infer(g, indices, input_shape, kernel, stride, padding, dilation):
    if indices.dtype is not D.int64:
        raise DTypeError(f"max_pool2d_backward: indices must be int64, got {indices.dtype}")
    if (
        g.ndim != 4
        or tuple(indices.shape) != tuple(g.shape)
        or len(input_shape) != 4
        or tuple(input_shape[:2]) != tuple(g.shape[:2])
    ):
        raise ShapeError(
            f"max_pool2d_backward: grad {tuple(g.shape)} and indices {tuple(indices.shape)} must "
            f"be [N, C, OH, OW] of the same shape, matching input {tuple(input_shape)}"
        )
    return (tuple(input_shape), g.dtype)


def _max_pool2d_backward_bwd(ctx, gg):
    # out[b, c, indices[b, c, o]] += g[b, c, o]: linear in g, so d/dg = gather at the indices.
    (indices,) = ctx.saved
    n, c, oh, ow = indices.shape
    h, w = ctx.attrs["input_shape"][2:]
    flat = indices.reshape(n, c, oh * ow)
    return gg.contiguous().reshape(n, c, h * w).gather(2, flat).reshape(n, c, oh, ow), None


MAX_POOL2D_BACKWARD = defop(
    "max_pool2d_backward",
    infer=_max_pool2d_backward_infer,
    save_inputs=(1,),
    backward=_max_pool2d_backward_bwd,
    samples=lambda: _pool_samples(backward=True),
)


def max_pool2d_with_indices(
    input: Tensor, kernel, stride, padding, dilation, ceil_mode: bool = False
) -> tuple:
    """(values, indices) of max pooling a 4-D input; geometry as pairs of ints (normalised and
    validated by gpucore.nn.functional.max_pool2d, the public entry point)."""
    return apply(
        MAX_POOL2D,
        input.contiguous(),
        kernel=tuple(kernel),
        stride=tuple(stride),
        padding=tuple(padding),
        dilation=tuple(dilation),
        ceil_mode=bool(ceil_mode),
        src=tuple(input.shape),
    )


# ----------------------------------------------------------------------------- avg_pool2d
# avg_pool2d over [N, C, H, W]: attrs kernel/stride/padding (pairs), ceil_mode,
# count_include_pad and divisor (0: PyTorch's window count; else divisor_override). Its backward
# avg_pool2d_backward(grad, input_shape=...) is linear in grad; its own backward is avg_pool2d
# of the incoming gradient with the same attrs (the adjoint of an adjoint).
def _avg_out(x_shape, kernel, stride, padding, ceil_mode):
    h, w = x_shape[2:]
    oh = pool_out("avg_pool2d", h, kernel[0], stride[0], padding[0], 1, ceil_mode)[0]
    ow = pool_out("avg_pool2d", w, kernel[1], stride[1], padding[1], 1, ceil_mode)[0]
    return oh, ow


def _avg_pool2d_infer(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor, src):
    if x.ndim != 4:
        raise ShapeError(f"avg_pool2d: expects a 4-D [N, C, H, W] input, got {tuple(x.shape)}")
    if not x.dtype.is_floating_point:
        raise DTypeError(f"avg_pool2d: expects a floating point input, got {x.dtype}")
    n, c = x.shape[:2]
    return ((n, c) + _avg_out(x.shape, kernel, stride, padding, ceil_mode), x.dtype)


def _avg_attrs(a: dict) -> dict:
    return {
        k: a[k]
        for k in ("kernel", "stride", "padding", "ceil_mode", "count_include_pad", "divisor")
    }


def _avg_pool2d_bwd(ctx, g):
    return (apply(AVG_POOL2D_BACKWARD, g, input_shape=ctx.attrs["src"], **_avg_attrs(ctx.attrs)),)


def _np_avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor, src=None):
    """float64 reference: PyTorch's divisor rule, window by window."""
    n, c, h, w = x.shape
    oh = _np_pool_size(h, kernel[0], stride[0], padding[0], 1, ceil_mode)
    ow = _np_pool_size(w, kernel[1], stride[1], padding[1], 1, ceil_mode)
    out = np.zeros((n, c, oh, ow))
    for i, j in np.ndindex(oh, ow):
        h0, w0 = i * stride[0] - padding[0], j * stride[1] - padding[1]
        h1, w1 = min(h0 + kernel[0], h + padding[0]), min(w0 + kernel[1], w + padding[1])
        size = (h1 - h0) * (w1 - w0)
        a, b, e, f = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
        s = x[:, :, a:e, b:f].sum((2, 3))
        div = divisor or (size if count_include_pad else (e - a) * (f - b))
        out[:, :, i, j] = s / div
    return out


# (input shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
_AVG_GEOMS = [
    ((1, 2, 6, 6), (2, 2), (2, 2), (0, 0), False, True, 0),
    ((2, 1, 7, 5), (3, 3), (2, 1), (1, 1), False, True, 0),
    ((2, 1, 7, 5), (3, 3), (2, 1), (1, 1), False, False, 0),
    ((1, 2, 5, 6), (2, 3), (2, 2), (1, 1), True, False, 0),
    ((1, 2, 5, 6), (3, 2), (2, 2), (1, 0), True, True, 3),
]


def _avg_samples(backward=False):
    out = []
    for i, (shape, k, s, p, ceil, cip, div) in enumerate(_AVG_GEOMS):
        attrs = dict(
            kernel=k, stride=s, padding=p, ceil_mode=ceil, count_include_pad=cip, divisor=div
        )
        x = uniform(*shape, seed=i)
        if not backward:
            out.append(Sample(x, src=shape, ref=_np_avg_pool2d, **attrs))
            continue
        gshape = shape[:2] + _avg_out(shape, k, s, p, ceil)

        def ref(g, input_shape, _a=attrs, **_):
            # the adjoint of the forward: d/dx <g, avg_pool2d(x)> by the forward's linearity
            cols = np.eye(int(np.prod(input_shape[2:])))
            one = cols.reshape(-1, 1, *input_shape[2:])
            m = _np_avg_pool2d(one, **_a).reshape(len(cols), -1)  # [h*w, oh*ow]
            gg = g.reshape(g.shape[0], g.shape[1], -1) @ m.T
            return gg.reshape(input_shape)

        out.append(Sample(uniform(*gshape, seed=i + 10), input_shape=shape, ref=ref, **attrs))
    return out


AVG_POOL2D = defop(
    "avg_pool2d",
    infer=_avg_pool2d_infer,
    backward=_avg_pool2d_bwd,
    samples=_avg_samples,
)


def _avg_pool2d_backward_infer(g, input_shape, **attrs):
    want = tuple(input_shape[:2]) + _avg_out(
        input_shape, attrs["kernel"], attrs["stride"], attrs["padding"], attrs["ceil_mode"]
    )
    if len(input_shape) != 4 or tuple(g.shape) != want:
        raise ShapeError(
            f"avg_pool2d_backward: grad {tuple(g.shape)} must be {want} for input "
            f"{tuple(input_shape)}"
        )
    return (tuple(input_shape), g.dtype)


AVG_POOL2D_BACKWARD = defop(
    "avg_pool2d_backward",
    infer=_avg_pool2d_backward_infer,
    backward=lambda ctx, gg: (
        apply(AVG_POOL2D, gg.contiguous(), src=ctx.attrs["input_shape"], **_avg_attrs(ctx.attrs)),
    ),
    samples=lambda: _avg_samples(backward=True),
)


def avg_pool2d(
    input: Tensor, kernel, stride, padding, ceil_mode, count_include_pad, divisor
) -> Tensor:
    """Average pooling of a 4-D host tensor in one C pass (validated by
    gpucore.nn.functional.avg_pool2d, the public entry point); divisor 0 is PyTorch's count."""
    return apply(
        AVG_POOL2D,
        input.contiguous(),
        kernel=tuple(kernel),
        stride=tuple(stride),
        padding=tuple(padding),
        ceil_mode=bool(ceil_mode),
        count_include_pad=bool(count_include_pad),
        divisor=int(divisor),
        src=tuple(input.shape),
    )
