"""Normalization primitives with fused kernels: native_layer_norm (PyTorch's name: the values and
each row's mean and 1 / sqrt(var + eps)) and native_layer_norm_backward (the input, weight and
bias gradients in one pass). gpucore.nn.functional.layer_norm runs them on host tensors; on other
devices, and while a graph is captured (the runtime fuses the composition itself), it stays a
composition of gpucore ops.

Inputs are always (x, weight, bias) [*, n] / [n] / [n] over the last ``k`` dims flattened to n;
attrs ``affine`` = (weight given, bias given): a missing one is a stand-in constant that the
kernel ignores. The backward is the fused op unless a graph of the gradient is being built
(create_graph): then it is the composition, which is differentiable again.

kernels: backends/cpu/kernels/norm.py (cpu/norm.c); none on Vulkan.
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd import grad
from ..autograd.grad_mode import _state as _grad_state
from ..creation import zeros
from ..errors import DTypeError, ShapeError
from .registry import apply, defop
from .samples import Sample, uniform


def _rows(x, k):
    return math.prod(x.shape[: x.ndim - k])


def _ln_infer(x, w, b, k, eps, affine):
    if not x.dtype.is_floating_point:
        raise DTypeError(f"native_layer_norm: expects a floating point input, got {x.dtype}")
    n = math.prod(x.shape[x.ndim - k :])
    if k < 1 or x.ndim < k or w.numel() != n or b.numel() != n:
        raise ShapeError(
            f"native_layer_norm: input {tuple(x.shape)} over its last {k} dims needs weight and "
            f"bias of {n} values, got {tuple(w.shape)} and {tuple(b.shape)}"
        )
    rows = (_rows(x, k),)
    return [(tuple(x.shape), x.dtype), (rows, x.dtype), (rows, x.dtype)]


def layer_norm_composed(x, w, b, k, eps, mean=None, rstd=None):
    """layer_norm in gpucore ops (any device, differentiable to any order); with mean / rstd
    given (as [rows]) they are used instead of being recomputed."""
    dims = tuple(range(x.ndim - k, x.ndim))
    if mean is None:
        mean = x.mean(dims, keepdim=True)
        xc = x - mean
        rstd = ((xc * xc).mean(dims, keepdim=True) + eps).rsqrt()
    else:
        keep = tuple(x.shape[: x.ndim - k]) + (1,) * k
        mean, rstd = mean.reshape(keep), rstd.reshape(keep)
        xc = x - mean
    out = xc * rstd
    if w is not None:
        out = out * w
    if b is not None:
        out = out + b
    return out


def _ln_bwd(ctx, g):
    x, w, mean, rstd = ctx.saved
    k, affine = ctx.attrs["k"], ctx.attrs["affine"]
    need = ctx.needs_input_grad
    if _grad_state.enabled:  # create_graph: the composition's gradient, differentiable again
        out = layer_norm_composed(x, w if affine[0] else None, None, k, ctx.attrs["eps"])
        wrt = [t for t, n in ((x, need[0]), (w, need[1] and affine[0])) if n]
        gs = list(grad(out, wrt, g, create_graph=True)) if wrt else []
        gx = gs.pop(0) if need[0] else None
        gw = gs.pop(0) if need[1] and affine[0] else None
        dims = tuple(range(g.ndim - k))
        gb = g.sum(dims) if need[2] and affine[1] else None
        return gx, gw, gb
    gx, gw, gb = apply(
        LAYER_NORM_BACKWARD,
        x,
        w,
        mean,
        rstd,
        g,
        k=k,
        affine=affine,
        need=(need[0], need[1] and affine[0], need[2] and affine[1]),
    )
    return (
        gx if need[0] else None,
        gw if need[1] and affine[0] else None,
        gb if need[2] and affine[1] else None,
    )


def _np_layer_norm(x, w, b, k, eps, affine):
    dims = tuple(range(x.ndim - k, x.ndim))
    mean = x.mean(dims, keepdims=True)
    var = ((x - mean) ** 2).mean(dims, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    out = (x - mean) * rstd
    if affine[0]:
        out = out * w
    if affine[1]:
        out = out + b
    return out, mean.reshape(-1), rstd.reshape(-1)


def _ln_samples():
    out = []
    for i, (shape, k, affine) in enumerate(
        [
            ((4, 7), 1, (True, True)),
            ((2, 3, 5), 2, (True, False)),
            ((3, 9), 1, (False, False)),
            ((2, 3, 17), 1, (True, True)),
        ]
    ):
        ns = shape[len(shape) - k :]
        x = uniform(*shape, seed=i) * 3 + 1
        w, b = uniform(*ns, seed=i + 10), uniform(*ns, seed=i + 20)
        out.append(Sample(x, w, b, k=k, eps=1e-5, affine=affine, ref=_np_layer_norm))
    return out


LAYER_NORM = defop(
    "native_layer_norm",
    infer=_ln_infer,
    save_inputs=(0, 1),
    save_outputs=(1, 2),
    backward=_ln_bwd,
    samples=_ln_samples,
)


def _ln_bwd_infer(x, w, mean, rstd, g, k, affine, need):
    if tuple(g.shape) != tuple(x.shape) or g.dtype is not x.dtype:
        raise ShapeError(
            f"native_layer_norm_backward: grad {tuple(g.shape)} {g.dtype} must match the input "
            f"{tuple(x.shape)} {x.dtype}"
        )
    ns = tuple(w.shape)
    return [(tuple(x.shape), x.dtype), (ns, x.dtype), (ns, x.dtype)]


def _np_layer_norm_backward(x, w, mean, rstd, g, k, affine, need):
    dims = tuple(range(x.ndim - k, x.ndim))
    keep = x.shape[: x.ndim - k] + (1,) * k
    xh = (x - mean.reshape(keep)) * rstd.reshape(keep)
    gh = g * w if affine[0] else g
    gx = rstd.reshape(keep) * (
        gh - gh.mean(dims, keepdims=True) - xh * (gh * xh).mean(dims, keepdims=True)
    )
    lead = tuple(range(x.ndim - k))
    return gx, (g * xh).sum(lead), g.sum(lead)


def _ln_bwd_samples():
    out = []
    for i, (shape, k, affine) in enumerate(
        [((4, 7), 1, (True, True)), ((2, 3, 5), 2, (False, False)), ((70, 9), 1, (True, True))]
    ):
        ns = shape[len(shape) - k :]
        x = uniform(*shape, seed=i) * 2 + 0.5
        w = uniform(*ns, seed=i + 10)
        _, mean, rstd = _np_layer_norm(x, w, w, k, 1e-5, affine)
        g = uniform(*shape, seed=i + 30)
        out.append(
            Sample(
                x,
                w,
                mean,
                rstd,
                g,
                k=k,
                affine=affine,
                need=(True, True, True),
                ref=_np_layer_norm_backward,
                grad=False,
                atol=1e-5,
            )
        )
    return out


LAYER_NORM_BACKWARD = defop(
    "native_layer_norm_backward",
    infer=_ln_bwd_infer,
    samples=_ln_bwd_samples,
)


_STANDINS: dict = {}


def _standin(n: int, like):
    """A constant stand-in for a missing weight / bias (the kernel ignores it), one per size."""
    key = (n, like.dtype)
    t = _STANDINS.get(key)
    if t is None:
        t = _STANDINS[key] = zeros(n, dtype=like.dtype)
    return t


def native_layer_norm(x, w, b, k: int, eps: float):
    """(out, mean, rstd) of layer_norm over the last k dims of a host tensor x (w, b: None or
    the normalized shape's values), one C pass per row."""
    n = math.prod(x.shape[x.ndim - k :])
    affine = (w is not None, b is not None)
    return apply(
        LAYER_NORM,
        x.contiguous(),
        w.contiguous() if w is not None else _standin(n, x),
        b.contiguous() if b is not None else _standin(n, x),
        k=k,
        eps=float(eps),
        affine=affine,
    )
