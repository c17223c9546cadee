"""Concat, Split, Tile and Pad (``pad`` is shared with Conv and the pools, for pads that are not
the same on both sides).

Fills are a one-element constant expanded to the fill's shape, not a full-size constant, so that
a fill whose shape follows a dynamic axis stays one graph for every size.
"""

from __future__ import annotations

import numpy as np

from .common import gc, table

HANDLERS, handles = table()


@handles("Concat")
def concat(ctx, node, ins):
    """Concat(axis)."""
    vals = [v for v in ins if v is not None]
    if not vals:
        raise ctx.invalid("needs at least one input")
    rank = len(vals[0].shape)
    axis = ctx.axis(int(ctx.attr("axis")), rank)
    for v in vals:
        shp = [int(s) for s in v.shape]
        ref = [int(s) for s in vals[0].shape]
        if len(shp) != rank or shp[:axis] + shp[axis + 1 :] != ref[:axis] + ref[axis + 1 :]:
            raise ctx.invalid(f"cannot concatenate shapes {ref} and {shp} on axis {axis}")
    out_shape = [int(s) for s in vals[0].shape]
    out_shape[axis] = sum(int(v.shape[axis]) for v in vals)
    ctx.check_size(out_shape)
    if all(ctx.is_static(v) for v in vals):
        return np.concatenate(vals, axis=axis)
    ts = [ctx.tensor(v) for v in vals if int(v.shape[axis]) or len(vals) == 1]
    return ts[0] if len(ts) == 1 else gc.cat(ts, axis)


@handles("Split")
def split(ctx, node, ins):
    """Split(split sizes: input since opset 13, attribute before; or num_outputs / equal parts,
    the last one smaller)."""
    x = ins[0]
    dims = [int(s) for s in x.shape]
    axis = ctx.axis(int(ctx.attr("axis", 0)), len(dims))
    n = dims[axis]
    sizes = ctx.attr("split", None)
    if len(ins) > 1 and ins[1] is not None:
        sizes = ctx.ints(ins[1], "split")
    parts = ctx.attr("num_outputs", None) or len(node.outputs)
    if sizes is None:
        step = -(-n // parts)
        sizes = [min(step, n - i * step) for i in range(parts)]
        if any(s <= 0 for s in sizes) and ctx.opset < 18:
            raise ctx.invalid(f"cannot split {n} into {parts} parts")
    sizes = [int(s) for s in sizes]
    if sum(sizes) != n or any(s < 0 for s in sizes) or len(sizes) != len(node.outputs):
        raise ctx.invalid(f"split sizes {sizes} do not fit axis {axis} of size {n}")
    out, start = [], 0
    for s in sizes:
        if ctx.is_static(x):
            out.append(np.take(x, np.arange(start, start + s), axis=axis))
        else:
            out.append(x.narrow(axis, start, s))
        start += s
    return out


@handles("Tile")
def tile(ctx, node, ins):
    """Tile(repeats): as a view [.., 1, d, ..] expanded to [.., r, d, ..], then one reshape."""
    x = ctx.materialize(ins[0], ins[1])
    reps = ctx.ints(ins[1], "repeats")
    dims = [int(s) for s in x.shape]
    if len(reps) != len(dims) or any(r < 0 for r in reps):
        raise ctx.invalid(f"repeats {reps} for an input of rank {len(dims)}")
    out = ctx.check_size([d * r for d, r in zip(dims, reps)])
    if all(r == 1 for r in reps):
        return x
    if ctx.is_static(x):
        return np.tile(x, reps)
    t = x.reshape(*[v for d in dims for v in (1, d)])
    t = t.expand(*[v for d, r in zip(dims, reps) for v in (r, d)])
    return t.reshape(*out)


def pad(ctx, x, amounts: list, mode: str = "constant", value=0):
    """``x`` padded by ``amounts`` [(before, after)] per dim (negative: cropped); mode
    constant / reflect / edge / wrap (ONNX's names)."""
    dims = [int(s) for s in x.shape]
    key = []
    for n, (lo, hi) in zip(dims, amounts):
        start, stop = max(-lo, 0), n - max(-hi, 0)
        if stop < start:
            raise ctx.invalid(f"pads {amounts} crop more than the input's {dims}")
        key.append(slice(start, stop))
    if any(k.start or k.stop != n for k, n in zip(key, dims)):
        x = x[tuple(key)]
        dims = [int(s) for s in x.shape]
    amounts = [(max(lo, 0), max(hi, 0)) for lo, hi in amounts]
    ctx.check_size([n + lo + hi for n, (lo, hi) in zip(dims, amounts)])
    if not any(lo or hi for lo, hi in amounts):
        return x
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ctx.unsupported(f"mode={mode!r}", attribute="mode")
    if ctx.is_static(x):
        kw = {"constant_values": value} if mode == "constant" else {}
        return np.pad(x, amounts, mode=mode, **kw)
    for d, (lo, hi) in enumerate(amounts):
        if not (lo or hi):
            continue
        if mode == "constant":
            fill = ctx.tensor(np.asarray(value, dtype=x.dtype.np)).reshape(*[1] * len(dims))
            parts = []
            for amount in (lo, hi):
                shape = list(x.shape)
                shape[d] = amount
                parts.append(fill.expand(*shape) if amount else None)
            x = gc.cat([t for t in (parts[0], x, parts[1]) if t is not None], d)
        else:
            if dims[d] == 0 or (mode == "reflect" and max(lo, hi) >= dims[d]):
                raise ctx.invalid(f"{mode} padding {lo, hi} of a dim of size {dims[d]}")
            idx = np.pad(np.arange(dims[d], dtype=np.int64), (lo, hi), mode=mode)
            x = x.index_select(d, ctx.tensor(idx))
    return x


@handles("Pad")
def pad_op(ctx, node, ins):
    """Pad(data, pads, constant_value, axes) (pads and value as attributes before opset 11)."""
    x = ins[0]
    rank = len(x.shape)
    mode = ctx.attr("mode", "constant")
    if ctx.opset < 11:
        pads, value = [int(p) for p in ctx.attr("pads")], float(ctx.attr("value", 0.0))
    else:
        pads = ctx.ints(ins[1], "pads")
        value = 0
        if len(ins) > 2 and ins[2] is not None:
            cv = ctx.static(ins[2], "constant_value")
            value = cv.reshape(-1)[0].item() if cv.size else 0
    axes = list(range(rank))
    if len(ins) > 3 and ins[3] is not None:
        axes = [ctx.axis(a, rank) for a in ctx.ints(ins[3], "axes")]
    if len(pads) != 2 * len(axes):
        raise ctx.invalid(f"pads {pads} for {len(axes)} axes")
    amounts = [(0, 0)] * rank
    for i, a in enumerate(axes):
        amounts[a] = (pads[i], pads[i + len(axes)])
    return pad(ctx, x, amounts, mode, value)


@handles("CenterCropPad")
def center_crop_pad(ctx, node, ins):
    """CenterCropPad(input, shape; axes): each axis cropped or zero-padded to its size about
    the centre (an odd difference: one more after)."""
    x = ins[0]
    dims = [int(s) for s in x.shape]
    shape = ctx.ints(ins[1], "shape")
    axes = [ctx.axis(int(a), len(dims)) for a in (ctx.attr("axes", None) or range(len(dims)))]
    if len(shape) != len(axes):
        raise ctx.invalid(f"shape {shape} for axes {axes}")
    amounts = [(0, 0)] * len(dims)
    for a, size in zip(axes, shape):
        d = size - dims[a]  # > 0: pad, < 0: crop
        half = abs(d) // 2
        amounts[a] = (half, d - half) if d >= 0 else (-half, d + half)
    return pad(ctx, x, amounts)
