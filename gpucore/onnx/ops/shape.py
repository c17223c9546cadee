"""Shape ops: Reshape Flatten Transpose Squeeze Unsqueeze Expand Identity Dropout.

Target shapes are computed here as Python ints (from static operands and the input's sizes)
and handed to gpucore's reshape / expand / permute, which the runtime records as views; sizes
that follow a dynamic axis become symbolic through the runtime's multi-size tracing.
"""

from __future__ import annotations

import math

import numpy as np

from .common import axes_input, gc, normalize_axes, table

HANDLERS, handles = table()


def reshaped(ctx, x, dims: list):
    """``x`` reshaped to ``dims`` (Python ints, no -1)."""
    if ctx.is_static(x):
        return x.reshape(dims)
    return x.reshape(*dims) if tuple(x.shape) != tuple(dims) else x


@handles("Reshape")
def reshape(ctx, node, ins):
    """Reshape(data, shape): 0 copies the input's size (unless allowzero), -1 is inferred."""
    x = ins[0]
    target = ctx.ints(ins[1], "shape")
    allowzero = ctx.attr("allowzero", 0)
    dims = [int(s) for s in x.shape]
    out = []
    for i, s in enumerate(target):
        if s == 0 and not allowzero:
            if i >= len(dims):
                raise ctx.invalid(f"shape {target}: a 0 at index {i} copies no input dim")
            out.append(dims[i])
        elif s < -1:
            raise ctx.invalid(f"shape {target} has a size below -1")
        else:
            out.append(s)
    total = math.prod(dims)
    if out.count(-1) > 1:
        raise ctx.invalid(f"shape {target} has more than one -1")
    if -1 in out:
        known = math.prod(s for s in out if s != -1)
        if known == 0 or total % known:
            raise ctx.invalid(f"cannot reshape {tuple(dims)} to {target}")
        out[out.index(-1)] = total // known
    if math.prod(out) != total:
        raise ctx.invalid(f"cannot reshape {tuple(dims)} to {target}")
    return reshaped(ctx, x, out)


@handles("Flatten")
def flatten(ctx, node, ins):
    """Flatten(axis=1): [prod(dims[:axis]), prod(dims[axis:])]."""
    x = ins[0]
    dims = [int(s) for s in x.shape]
    axis = int(ctx.attr("axis", 1))
    if not -len(dims) <= axis <= len(dims):
        raise ctx.invalid(f"axis {axis} is out of range for rank {len(dims)}")
    if axis < 0:
        axis += len(dims)
    return reshaped(ctx, x, [math.prod(dims[:axis]), math.prod(dims[axis:])])


@handles("Transpose")
def transpose(ctx, node, ins):
    """Transpose(perm; default: reversed)."""
    x = ins[0]
    rank = len(x.shape)
    perm = ctx.attr("perm", None)
    perm = list(range(rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(ctx.axis(p, rank, "perm entry") for p in perm) != list(range(rank)):
        raise ctx.invalid(f"perm {perm} is not a permutation of {rank} axes")
    perm = [p % rank for p in perm]
    if perm == list(range(rank)):
        return x
    if ctx.is_static(x):
        return np.require(x.transpose(perm), requirements="C")
    return x.permute(*perm)


@handles("Squeeze")
def squeeze(ctx, node, ins):
    """Squeeze(axes: input since opset 13, attribute before; none: every size-1 dim)."""
    x = ins[0]
    dims = [int(s) for s in x.shape]
    axes = axes_input(ctx, ins, 1)
    if axes is None:
        drop = [i for i, s in enumerate(dims) if s == 1]
    else:
        drop = normalize_axes(ctx, axes, len(dims))
        if any(dims[a] != 1 for a in drop):
            raise ctx.invalid(f"cannot squeeze axes {axes} of shape {tuple(dims)}")
    return reshaped(ctx, x, [s for i, s in enumerate(dims) if i not in drop])


@handles("Unsqueeze")
def unsqueeze(ctx, node, ins):
    """Unsqueeze(axes: input since opset 13, attribute before), relative to the output."""
    x = ins[0]
    dims = [int(s) for s in x.shape]
    axes = axes_input(ctx, ins, 1)
    if axes is None:
        raise ctx.invalid("axes are missing")
    rank = len(dims) + len(axes)
    new = set(normalize_axes(ctx, axes, rank))
    it = iter(dims)
    return reshaped(ctx, x, [1 if i in new else next(it) for i in range(rank)])


@handles("Expand")
def expand(ctx, node, ins):
    """Expand(input, shape): the two shapes broadcast together (numpy's rules)."""
    x = ctx.materialize(ins[0], ins[1])
    target = ctx.broadcast(x.shape, ctx.ints(ins[1], "shape"))
    if tuple(target) == tuple(int(s) for s in x.shape):
        return x
    if ctx.is_static(x):
        return np.broadcast_to(x, target)
    return x.expand(*target)


@handles("Identity")
def identity(ctx, node, ins):
    """Identity."""
    return ins[0]


@handles("Dropout")
def dropout(ctx, node, ins):
    """Dropout at inference, or in training mode with ratio 0: the input as it is (and an
    all-true mask: ones of the input's dtype before opset 10). Training mode with a ratio above
    0 and a ``seed``: the mask that ONNX's reference implementation draws, ``RandomState(seed)
    .uniform(0, 1, shape) >= ratio``, the same on every run (as there: a fixed seed gives a
    fixed mask), and ``x * mask / (1 - ratio)``. Without a seed the runtime would choose one: a
    compiled model does not sample."""
    seed = ctx.attr("seed", None)
    ctx.attr("ratio", None)
    ctx.attr("is_test", None)
    x = ins[0]
    shape = [int(s) for s in x.shape]
    mask = None  # all true unless drawn below
    training = ins[2] if len(ins) > 2 else None
    if training is not None and bool(ctx.static(training, "training_mode").reshape(-1)[0]):
        ratio = ins[1] if len(ins) > 1 and ins[1] is not None else np.float32(0.5)
        p = float(ctx.static(ratio, "ratio").reshape(-1)[0])
        if p != 0.0:
            if seed is None:
                raise ctx.unsupported("Dropout in training mode with a ratio above 0 and no seed")
            if ctx.dynamic and not ctx.is_static(x):
                raise ctx.unsupported(
                    "Dropout in training mode on a model with dynamic axes (the seeded mask has "
                    "the input's shape; export with fixed sizes)"
                )
            if not 0.0 < p < 1.0:
                raise ctx.unsupported(f"Dropout ratio {p} (training mode takes 0 <= ratio < 1)")
            mask = np.random.RandomState(int(seed)).uniform(0.0, 1.0, shape) >= p
            keep = ctx.static(x, "x") if ctx.is_static(x) else ctx.tensor(x)
            scale = np.asarray(mask, np.float32) * np.float32(1.0 / (1.0 - p))
            if ctx.is_static(keep):
                x = np.asarray(keep * scale.astype(keep.dtype))
            else:
                x = gc.mul(keep, ctx.tensor(scale.astype(keep.dtype.np)))
    if len(node.outputs) > 1 and node.outputs[1]:
        return [x, _all_true(ctx, ins[0], shape) if mask is None else mask]
    return [x]


def _all_true(ctx, x, shape: list):
    """Dropout's mask at inference: all true, with ``x``'s shape (before opset 10, ones of
    ``x``'s dtype). For a traced ``x``, one element expanded to its shape (a view, as
    ConstantOfShape's): a constant of the input's shape would change with a dynamic axis, which
    one graph cannot hold."""
    dtype = np.bool_ if ctx.opset >= 10 else (x.dtype if ctx.is_static(x) else x.dtype.np)
    if ctx.is_static(x):
        return np.ones(shape, dtype)
    one = ctx.tensor(np.ones((1,) * len(shape), dtype))
    return one.expand(*shape) if shape else one.reshape(())


def _permuted(ctx, x, shape: list, perm: list, out: list):
    """``x`` reshaped to ``shape``, permuted by ``perm``, reshaped to ``out``."""
    if ctx.is_static(x):
        return np.require(x.reshape(shape).transpose(perm), requirements="C").reshape(out)
    return x.reshape(*shape).permute(*perm).reshape(*out)


@handles("DepthToSpace")
def depth_to_space(ctx, node, ins):
    """DepthToSpace(blocksize, mode DCR | CRD) of an [N, C, H, W] input."""
    x = ins[0]
    b = int(ctx.attr("blocksize"))
    mode = ctx.attr("mode", "DCR")
    n, c, h, w = (int(s) for s in x.shape)
    if c % (b * b):
        raise ctx.invalid(f"blocksize {b} does not divide {c} channels")
    out = [n, c // (b * b), h * b, w * b]
    if mode == "DCR":
        return _permuted(ctx, x, [n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2], out)
    if mode == "CRD":
        return _permuted(ctx, x, [n, c // (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3], out)
    raise ctx.unsupported(f"mode={mode!r}", attribute="mode")


@handles("SpaceToDepth")
def space_to_depth(ctx, node, ins):
    """SpaceToDepth(blocksize, mode DCR | CRD (opset 28)) of an [N, C, H, W] input."""
    x = ins[0]
    b = int(ctx.attr("blocksize"))
    mode = ctx.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise ctx.unsupported(f"mode={mode!r}", attribute="mode")
    n, c, h, w = (int(s) for s in x.shape)
    if h % b or w % b:
        raise ctx.invalid(f"blocksize {b} does not divide {h}x{w}")
    shape = [n, c, h // b, b, w // b, b]
    perm = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
    return _permuted(ctx, x, shape, perm, [n, c * b * b, h // b, w // b])
