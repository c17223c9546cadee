"""Sliding windows: MaxPool AveragePool GlobalAveragePool GlobalMaxPool, and the window
arguments (kernel, strides, dilations, pads with auto_pad) Conv shares.

gpucore's pools and convolutions pad both sides alike; 1-D inputs run as [N, C, 1, L] through
the 2-D ops, 3-D inputs through the 3-D ones (max_pool3d, avg_pool3d, conv3d), and pads that
differ between the sides are applied by an explicit Pad first.
"""

from __future__ import annotations

import functools

import numpy as np

from ...creation import tensor as gc_tensor
from ...dtypes import float32
from ...nn import functional as F
from .common import table
from .joining import pad

HANDLERS, handles = table()


def window(ctx, x_spatial: list, kernel: list) -> tuple:
    """(strides, dilations, [(pad before, pad after)] per spatial dim) from the node's
    strides / dilations / pads / auto_pad attributes."""
    nd = len(kernel)
    strides = [int(s) for s in (ctx.attr("strides", None) or [1] * nd)]
    dilations = [int(d) for d in (ctx.attr("dilations", None) or [1] * nd)]
    pads = [int(p) for p in (ctx.attr("pads", None) or [0] * (2 * nd))]
    auto = ctx.attr("auto_pad", "NOTSET")
    if len(strides) != nd or len(dilations) != nd or len(pads) != 2 * nd:
        raise ctx.invalid(f"strides {strides}, dilations {dilations}, pads {pads} for {nd} dims")
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations) or any(p < 0 for p in pads):
        raise ctx.invalid(f"strides {strides}, dilations {dilations}, pads {pads}")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        amounts = []
        for n, k, s, d in zip(x_spatial, kernel, strides, dilations):
            out = -(-n // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
            small = total // 2
            amounts.append(
                (small, total - small) if auto == "SAME_UPPER" else (total - small, small)
            )
    elif auto == "VALID":
        amounts = [(0, 0)] * nd
    elif auto == "NOTSET":
        amounts = list(zip(pads[:nd], pads[nd:]))
    else:
        raise ctx.unsupported(f"auto_pad={auto!r}", attribute="auto_pad")
    return strides, dilations, amounts


def as_2d(ctx, x, what: str):
    """x as [N, C, H, W] (a 1-D input gets H = 1); a 3-D [N, C, D, H, W] input as it is."""
    if x.ndim in (4, 5):
        return x
    if x.ndim == 3:
        return x.reshape(int(x.shape[0]), int(x.shape[1]), 1, int(x.shape[2]))
    raise ctx.unsupported(f"{what} of a {x.ndim}-D input (gpucore supports 1-D to 3-D)")


def _2d(v: list, fill: int) -> list:
    return [fill] + v if len(v) == 1 else v


def symmetric(ctx, x, amounts: list, fill: float, limit=None):
    """(x, per-dim padding) for a gpucore op that pads both sides alike: pads that differ, or
    exceed ``limit[i]``, are applied here with ``fill`` first."""
    same = all(lo == hi for lo, hi in amounts)
    if same and (limit is None or all(lo <= m for (lo, _), m in zip(amounts, limit))):
        return x, [lo for lo, _ in amounts]
    full = [(0, 0)] * (x.ndim - len(amounts)) + list(amounts)
    return pad(ctx, x, full, "constant", fill), [0] * len(amounts)


def _kernel(ctx, nd: int) -> list:
    kernel = ctx.attr("kernel_shape")
    if len(kernel) != nd or any(int(k) < 1 for k in kernel):
        raise ctx.invalid(f"kernel_shape {kernel} for {nd} spatial dims")
    return [int(k) for k in kernel]


def _pool(ctx, node, ins, kind: str):
    x = ctx.tensor(ins[0])
    indices = None
    nd = x.ndim - 2
    x4 = as_2d(ctx, x, kind)
    kernel = _kernel(ctx, nd)
    strides, dilations, amounts = window(ctx, [int(s) for s in x.shape[2:]], kernel)
    ceil = bool(ctx.attr("ceil_mode", 0))
    k2, s2, d2 = _2d(kernel, 1), _2d(strides, 1), _2d(dilations, 1)
    am2 = [(0, 0)] + amounts if nd == 1 else amounts
    if kind == "MaxPool":
        order = int(ctx.attr("storage_order", 0))  # only the Indices output depends on it
        limit = [(d * (k - 1) + 1) // 2 for k, d in zip(k2, d2)]
        fill = -np.inf if x.dtype.is_floating_point else np.iinfo(x.dtype.np).min
        small = x.dtype.name in ("int8", "uint8")  # pooled in float32: exact
        xp, p = symmetric(ctx, x4.to(float32) if small else x4, am2, fill, limit)
        if len(node.outputs) > 1 and node.outputs[1] and nd < 3:
            y, i = F.max_pool2d(xp, k2, s2, p, d2, ceil_mode=ceil, return_indices=True)
            shift = [0, 0] if xp is x4 else [lo for lo, _ in am2]
            indices = _flat_indices(i, x4.shape, xp.shape, shift, order)
        else:
            y = (F.max_pool3d if nd == 3 else F.max_pool2d)(xp, k2, s2, p, d2, ceil_mode=ceil)
        y = y.to(x.dtype) if small else y
    elif any(d != 1 for d in dilations):
        include = bool(ctx.attr("count_include_pad", 0))
        mode = "include" if include else "exclude"
        return [_window_sums(ctx, x, kernel, strides, dilations, amounts, ceil, mode), None]
    else:
        include = bool(ctx.attr("count_include_pad", 0))
        limit = [k // 2 for k in k2]
        same = all(lo == hi for lo, hi in am2)
        xp, p = symmetric(ctx, x4, am2, 0.0, limit)
        avg = F.avg_pool3d if nd == 3 else F.avg_pool2d
        y = avg(xp, k2, s2, p, ceil_mode=ceil, count_include_pad=include)
        if not include and not (same and all(lo <= m for (lo, _), m in zip(am2, limit))):
            if ceil:
                raise ctx.unsupported(
                    "AveragePool with count_include_pad=0, ceil_mode=1 and pads that differ "
                    "between the sides or exceed half the kernel",
                    attribute="pads",
                )
            # the pads were applied above and counted: rescale by the real window sizes
            sizes = [int(n) for n in x4.shape[2:]]
            outs = [int(o) for o in y.shape[2:]]
            counts = [_counts(*args) for args in zip(sizes, k2, s2, [lo for lo, _ in am2], outs)]
            scale = np.prod(k2) / functools.reduce(np.multiply.outer, counts)
            y = y * ctx.tensor(scale.astype(y.dtype.np))
    if nd == 1:
        y = y.reshape(int(y.shape[0]), int(y.shape[1]), int(y.shape[3]))
        indices = indices if indices is None else indices.reshape(*[int(v) for v in y.shape])
    return [y, indices]


def _flat_indices(i, shape, padded, shift: list, order: int):
    """MaxPool's Indices output from max_pool2d's (row-major into each plane of the ``padded``
    input): ONNX's flat index into the whole unpadded input [N, C, H, W], its plane's row-major
    (storage_order 0) or column-major (1) position."""
    n, c, h, w = (int(v) for v in shape)
    wp = int(padded[3])
    if order == 0 and wp == w:  # already the position in the plane (no integer division)
        within = i - shift[0] * w
    else:
        row, col = i // wp - shift[0], i % wp - shift[1]
        within = row * w + col if order == 0 else row + col * h
    planes = np.arange(n * c, dtype=np.int64).reshape(n, c, 1, 1) * (h * w)
    return within + gc_tensor(planes)


def _counts(n: int, k: int, stride: int, lo: int, out: int) -> np.ndarray:
    """How many of each output window's k positions lie inside the n input positions."""
    start = np.arange(out) * stride - lo
    return np.minimum(start + k, n) - np.maximum(start, 0)


def _window_sums(ctx, x, kernel, strides, dilations, amounts, ceil: bool, mode: str):
    """Sums (mode 'sum') or means (the divisor counts the pads: 'include', or not: 'exclude')
    over dilated windows of any rank, as ONNX's reference: the window's taps that lie past the
    padded input (ceil_mode) are dropped. Separable: one constant [out, size] matrix per
    spatial dim (each window's real taps over its divisor along that dim), applied in turn."""
    y = x
    for i, (size, k, st, dl, (lo, hi)) in enumerate(
        zip([int(n) for n in x.shape[2:]], kernel, strides, dilations, amounts)
    ):
        num = size + lo + hi - (dl * (k - 1) + 1)
        if num < 0:
            raise ctx.invalid(f"kernel {kernel} with dilations {dilations} exceeds the input")
        out = (-(-num // st) if ceil else num // st) + 1
        if ceil and (out - 1) * st >= size + lo:  # the last window starts in the end padding
            out -= 1
        m = np.zeros((out, size))
        for o in range(out):
            taps = [o * st + j * dl for j in range(k) if o * st + j * dl < size + lo + hi]
            real = [t - lo for t in taps if 0 <= t - lo < size]
            m[o, real] = 1.0
            if mode != "sum":
                m[o] /= len(taps) if mode == "include" else max(len(real), 1)
        dim = 2 + i
        mt = ctx.tensor(np.ascontiguousarray(m.T).astype(x.dtype.np))  # [size, out]
        y = y.transpose(dim, -1).matmul(mt).transpose(dim, -1)
    return y


@handles("MaxPool")
def max_pool(ctx, node, ins):
    """MaxPool (1-D to 3-D; int8 / uint8 through float32; the Indices output, storage_order 0
    or 1, for 1-D and 2-D)."""
    return _pool(ctx, node, ins, "MaxPool")


@handles("AveragePool")
def average_pool(ctx, node, ins):
    """AveragePool (1-D to 3-D; count_include_pad; dilations by constant matrices)."""
    return _pool(ctx, node, ins, "AveragePool")[:1]


@handles("GlobalAveragePool", "GlobalMaxPool")
def global_pool(ctx, node, ins):
    """GlobalAveragePool / GlobalMaxPool: over every spatial dim, kept as size 1."""
    x = ctx.tensor(ins[0])
    dims = tuple(range(2, x.ndim))
    if not dims:
        return x
    if node.op_type == "GlobalAveragePool":
        return x.mean(dim=dims, keepdim=True)
    return x.amax(dim=dims, keepdim=True)


@handles("LpPool")
def lp_pool(ctx, node, ins):
    """LpPool(p; 1-D to 3-D): (sum of |x|^p over each window) ^ (1/p), the pads counting as
    zeros: an average pool with divisor 1 (dilated windows: sums by constant matrices)."""
    x = ctx.tensor(ins[0])
    p = float(ctx.attr("p", 2))
    nd = x.ndim - 2
    x4 = as_2d(ctx, x, "LpPool")
    kernel = _kernel(ctx, nd)
    strides, dilations, amounts = window(ctx, [int(s) for s in x.shape[2:]], kernel)
    ceil = bool(ctx.attr("ceil_mode", 0))
    if any(d != 1 for d in dilations):
        powered = x.abs() ** p if p != 1.0 else x.abs()
        y = _window_sums(ctx, powered, kernel, strides, dilations, amounts, ceil, "sum")
        return y ** (1.0 / p)
    k2, s2 = _2d(kernel, 1), _2d(strides, 1)
    am2 = [(0, 0)] + amounts if nd == 1 else amounts
    powered = x4.abs() ** p if p != 1.0 else x4.abs()
    xp, pads = symmetric(ctx, powered, am2, 0.0, [k // 2 for k in k2])
    avg = F.avg_pool3d if nd == 3 else F.avg_pool2d
    # the window sums (divisor 1: ceil_mode's windows past the end hold fewer elements)
    y = avg(xp, k2, s2, pads, ceil_mode=ceil, divisor_override=1) ** (1.0 / p)
    return y.reshape(int(y.shape[0]), int(y.shape[1]), int(y.shape[3])) if nd == 1 else y
