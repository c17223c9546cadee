"""Normalization primitives with fused kernels, PyTorch's names: native_layer_norm (the values
and each row's mean and 1 / sqrt(var + eps)), native_rms_norm (values and each row's
1 / sqrt(mean(x^2) + eps)), native_group_norm (values and each (sample, group)'s mean and rstd),
each with a backward op giving the input, weight and bias gradients in one pass.
gpucore.nn.functional's layer_norm, rms_norm and group_norm run them on host tensors (layer_norm
on Vulkan device tensors too); on other devices, and while the runtime traces a graph (it fuses
the composition itself), they stay compositions of gpucore ops. batch_norm is in norm_batch.py.

Inputs are (x, weight[, bias]); attrs ``affine`` says which of weight / bias were given (a
missing one is a stand-in constant that the kernel ignores). layer_norm / rms_norm normalize the
last ``k`` dims flattened to n (weight, bias [n]); group_norm [N, C, *] over each of ``groups``
groups of C / groups channels (weight, bias [C]). The backward is the fused op unless a graph
of the gradient is being built (create_graph): then it is the composition's, which is
differentiable again.

kernels: backends/cpu/kernels/norm.py (cpu/norm.c); native_layer_norm on Vulkan
(backends/vulkan/kernels/norm.py: float32, float16 and bfloat16 read by the shader, which
F.layer_norm uses for device tensors; its backward is composed on the device in float32).
Small host tensors of layer_norm / rms_norm (+ backward) and group_norm take the fast lane
(cpu/python/fastpath_nn.c), the same kernel in one C call.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _cpu
from ..autograd import grad
from ..autograd.grad_mode import _state as _grad_state
from ..creation import zeros
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .common import host_contiguous
from .norm_device import device_ln_grads
from .registry import AUTOCAST, CAPTURE, apply, capturing, defop, record
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


def _shaped(grads, x, k):
    """The fast lane's (gx, gw[, gb]) with gw, gb [n] in the normalized shape x.shape[-k:]."""
    if k == 1:
        return grads
    ns = tuple(x.shape[x.ndim - k :])
    return (grads[0],) + tuple(t if t is None else t.reshape(ns) for t in grads[1:])


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
    want = (need[0], need[1] and affine[0], need[2] and affine[1])
    if x._dev is not None:  # no backward shader: composed on the device (no host round trip)
        return device_ln_grads(x, w, mean, rstd, g, k, affine, want)
    n = math.prod(x.shape[x.ndim - k :])
    fast = _fast_bwd(x, w if affine[0] else None, mean, rstd, host_contiguous(g), n, False, want)
    if fast is not None:  # small host tensors: the same kernel in one C call
        return _shaped(fast, x, k)
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


def grad_matches(op: str, x, g) -> None:
    """A backward's incoming gradient has the input's shape and dtype (ShapeError naming op)."""
    if tuple(g.shape) != tuple(x.shape) or g.dtype is not x.dtype:
        raise ShapeError(
            f"{op}: grad {tuple(g.shape)} {g.dtype} must match the input {tuple(x.shape)} {x.dtype}"
        )


def _ln_bwd_infer(x, w, mean, rstd, g, k, affine, need):
    grad_matches("native_layer_norm_backward", x, g)
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


def _backward_sample(x, w, mean, rstd, g, ref, **attrs) -> Sample:
    """A sample of a fused normalization backward (layer, group and batch norm): inputs (x,
    weight, mean, rstd, grad_out) and the op's ``attrs``; all three gradients wanted, checked
    against the float64 reference ``ref``, not differentiated again."""
    return Sample(
        x, w, mean, rstd, g, **attrs, need=(True, True, True), ref=ref, grad=False, atol=1e-5
    )


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
            _backward_sample(x, w, mean, rstd, g, _np_layer_norm_backward, k=k, affine=affine)
        )
    return out


LAYER_NORM_BACKWARD = defop(
    "native_layer_norm_backward",
    infer=_ln_bwd_infer,
    samples=_ln_bwd_samples,
)


_STANDINS: dict = {}
_fast_fwd = _cpu.fast_norm_rows
_fast_bwd = _cpu.fast_norm_rows_backward
_fast_gn = _cpu.fast_group_norm


def _standin(n: int, like):
    """A constant stand-in for a missing weight / bias (the kernel ignores it), one per size."""
    key = (n, like.dtype)
    t = _STANDINS.get(key)
    if t is None:
        t = _STANDINS[key] = zeros(n, dtype=like.dtype)
    return t


def _needs_graph(*ts) -> bool:
    """Whether the fast lanes must record a graph: grad mode on and any of ts (None, a Tensor or
    a Parameter: the lanes take a module's weights) requiring grad."""
    if not _grad_state.enabled:
        return False
    for t in ts:
        if isinstance(t, Tensor) and t._requires_grad:
            return True
    return False


def fast_rows(op, x, ns, w, b, eps, rms):
    """layer_norm / rms_norm (rms) of host tensors over the trailing dims ns in one C call
    (cpu/python/fastpath_nn.c), the graph recorded as the op's; None when the lane does not take
    them (then the general path gives the same result)."""
    if (CAPTURE[0] is not None and capturing()) or AUTOCAST[0] is not None or type(x) is not Tensor:
        return None
    graph = _needs_graph(x, w, b)
    res = _fast_fwd(x, ns, w, b, eps, rms, graph)
    if res is None or not graph:
        return res
    out, mean, rstd = res
    n = math.prod(ns)
    wt = w if w is not None else _standin(n, x)
    if rms:
        record(op, (x, wt), (out, rstd), {"k": len(ns), "eps": eps, "affine": w is not None})
    else:
        bt = b if b is not None else _standin(n, x)
        attrs = {"k": len(ns), "eps": eps, "affine": (w is not None, b is not None)}
        record(op, (x, wt, bt), (out, mean, rstd), attrs)
    return out


def native_layer_norm(x, w, b, k: int, eps: float):
    """(out, mean, rstd) of layer_norm over the last k dims of x (w, b: None or the normalized
    shape's values), one pass per row (the C kernel, or the Vulkan shader on the device)."""
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


def composed_grads(fn, inputs, need, g):
    """The gradients of fn(*inputs) for g as a graph (create_graph: differentiable again), None
    for the inputs need marks False."""
    wrt = [t for t, n in zip(inputs, need) if n]
    gs = iter(grad(fn(*inputs), wrt, g, create_graph=True) if wrt else ())
    return tuple(next(gs) if n else None for n in need)


# ----------------------------------------------------------------------------- rms_norm
def rms_norm_composed(x, w, k, eps):
    """rms_norm in gpucore ops (any device, differentiable to any order)."""
    dims = tuple(range(x.ndim - k, x.ndim))
    out = x * ((x * x).mean(dims, keepdim=True) + eps).rsqrt()
    return out if w is None else out * w


def _rms_infer(x, w, k, eps, affine):
    if not x.dtype.is_floating_point:
        raise DTypeError(f"native_rms_norm: expects a floating point input, got {x.dtype}")
    n = math.prod(x.shape[x.ndim - k :])
    if k < 1 or x.ndim < k or w.numel() != n or w.dtype is not x.dtype:
        raise ShapeError(
            f"native_rms_norm: input {tuple(x.shape)} {x.dtype} over its last {k} dims needs a "
            f"weight of {n} values of its dtype, got {tuple(w.shape)} {w.dtype}"
        )
    return [(tuple(x.shape), x.dtype), ((_rows(x, k),), x.dtype)]


def _rms_bwd(ctx, g):
    x, w, rstd = ctx.saved
    k, affine, need = ctx.attrs["k"], ctx.attrs["affine"], ctx.needs_input_grad
    want = (need[0], need[1] and affine)
    if _grad_state.enabled:
        wc = w if affine else None
        return composed_grads(
            lambda x, w: rms_norm_composed(x, wc, k, ctx.attrs["eps"]), (x, w), want, g
        )
    n = math.prod(x.shape[x.ndim - k :])
    fast = _fast_bwd(
        x, w if affine else None, None, rstd, host_contiguous(g), n, True, want + (False,)
    )
    if fast is not None:
        return _shaped(fast[:2], x, k)
    gx, gw = apply(RMS_NORM_BACKWARD, x, w, rstd, g, k=k, affine=affine, need=want)
    return (gx if want[0] else None, gw if want[1] else None)


def _np_rms_norm(x, w, k, eps, affine):
    dims = tuple(range(x.ndim - k, x.ndim))
    rstd = 1 / np.sqrt((x * x).mean(dims, keepdims=True) + eps)
    return x * rstd * (w if affine else 1), rstd.reshape(-1)


def _rms_samples():
    out = []
    for i, (shape, k, affine) in enumerate(
        [((4, 7), 1, True), ((2, 3, 5), 2, True), ((3, 9), 1, False), ((2, 3, 17), 1, True)]
    ):
        x = uniform(*shape, seed=i + 40) * 3
        w = uniform(*shape[len(shape) - k :], seed=i + 50)
        out.append(Sample(x, w, k=k, eps=1e-6, affine=affine, ref=_np_rms_norm))
    return out


RMS_NORM = defop(
    "native_rms_norm",
    infer=_rms_infer,
    save_inputs=(0, 1),
    save_outputs=(1,),
    backward=_rms_bwd,
    samples=_rms_samples,
)


def _rms_bwd_infer(x, w, rstd, g, k, affine, need):
    grad_matches("native_rms_norm_backward", x, g)
    return [(tuple(x.shape), x.dtype), (tuple(w.shape), x.dtype)]


def _np_rms_norm_backward(x, w, rstd, g, k, affine, need):
    dims = tuple(range(x.ndim - k, x.ndim))
    rstd = rstd.reshape(x.shape[: x.ndim - k] + (1,) * k)
    xh = x * rstd
    gh = g * w if affine else g
    gx = rstd * (gh - xh * (gh * xh).mean(dims, keepdims=True))
    return gx, (g * xh).sum(tuple(range(x.ndim - k)))


def _rms_bwd_samples():
    out = []
    for i, (shape, k, affine) in enumerate(
        [((4, 7), 1, True), ((2, 3, 5), 2, False), ((70, 9), 1, True)]
    ):
        x = uniform(*shape, seed=i + 60) * 2
        w = uniform(*shape[len(shape) - k :], seed=i + 70)
        rstd = _np_rms_norm(x, w, k, 1e-6, affine)[1]
        g = uniform(*shape, seed=i + 80)
        out.append(
            Sample(
                x,
                w,
                rstd,
                g,
                k=k,
                affine=affine,
                need=(True, True),
                ref=_np_rms_norm_backward,
                grad=False,
            )
        )
    return out


RMS_NORM_BACKWARD = defop(
    "native_rms_norm_backward", infer=_rms_bwd_infer, samples=_rms_bwd_samples
)


def native_rms_norm(x, w, k: int, eps: float):
    """(out, rstd) of rms_norm over the last k dims of a host tensor x (w: None or the
    normalized shape's values), one C pass per row."""
    n = math.prod(x.shape[x.ndim - k :])
    wt = w.contiguous() if w is not None else _standin(n, x)
    return apply(RMS_NORM, x.contiguous(), wt, k=k, eps=float(eps), affine=w is not None)


# ----------------------------------------------------------------------------- group_norm
def group_norm_composed(x, groups, w, b, eps):
    """group_norm of [N, C, *] in gpucore ops (any device, differentiable to any order)."""
    n, c = x.shape[0], x.shape[1]
    xg = x.reshape(n, groups, x.numel() // max(n * groups, 1))  # n may be 0
    mean = xg.mean(-1, keepdim=True)
    xc = xg - mean
    var = (xc * xc).mean(-1, keepdim=True)
    out = (xc * (var + eps).rsqrt()).reshape(tuple(x.shape))
    shape = (1, c) + (1,) * (x.ndim - 2)
    if w is not None:
        out = out * w.reshape(shape)
    if b is not None:
        out = out + b.reshape(shape)
    return out


def _gn_infer(x, w, b, groups, eps, affine):
    if not x.dtype.is_floating_point:
        raise DTypeError(f"native_group_norm: expects a floating point input, got {x.dtype}")
    c = x.shape[1] if x.ndim >= 2 else 0
    if x.ndim < 2 or groups < 1 or c % groups or w.numel() != c or b.numel() != c:
        raise ShapeError(
            f"native_group_norm: input {tuple(x.shape)} [N, C, *] in {groups} groups needs C "
            f"divisible by the groups and weight and bias of C values, got {tuple(w.shape)} and "
            f"{tuple(b.shape)}"
        )
    stats = ((x.shape[0], groups), x.dtype)
    return [(tuple(x.shape), x.dtype), stats, stats]


def _gn_bwd(ctx, g):
    x, w, mean, rstd = ctx.saved
    groups, affine, need = ctx.attrs["groups"], ctx.attrs["affine"], ctx.needs_input_grad
    want = (need[0], need[1] and affine[0], need[2] and affine[1])
    if _grad_state.enabled:
        wc = w if affine[0] else None
        eps = ctx.attrs["eps"]
        gx, gw = composed_grads(
            lambda x, w: group_norm_composed(x, groups, wc, None, eps), (x, w), want[:2], g
        )
        gb = g.sum((0,) + tuple(range(2, g.ndim))) if want[2] else None
        return gx, gw, gb
    gx, gw, gb = apply(
        GROUP_NORM_BACKWARD, x, w, mean, rstd, g, groups=groups, affine=affine, need=want
    )
    return tuple(t if n else None for t, n in zip((gx, gw, gb), want))


def _np_group_norm(x, w, b, groups, eps, affine):
    n, c = x.shape[:2]
    xg = x.reshape(n, groups, -1)
    mean = xg.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((xg - mean) ** 2).mean(-1, keepdims=True) + eps)
    out = ((xg - mean) * rstd).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    out = out * (w.reshape(shape) if affine[0] else 1) + (b.reshape(shape) if affine[1] else 0)
    return out, mean[..., 0], rstd[..., 0]


_GN_CASES = [
    ((2, 6, 5), 3, (True, True)),
    ((3, 4, 2, 3), 2, (True, False)),
    ((2, 4), 4, (False, False)),
    ((1, 6, 9), 1, (False, True)),
]


def _gn_samples():
    out = []
    for i, (shape, groups, affine) in enumerate(_GN_CASES):
        x = uniform(*shape, seed=i + 90) * 3 + 1
        w, b = uniform(shape[1], seed=i + 100), uniform(shape[1], seed=i + 110)
        out.append(Sample(x, w, b, groups=groups, eps=1e-5, affine=affine, ref=_np_group_norm))
    return out


GROUP_NORM = defop(
    "native_group_norm",
    infer=_gn_infer,
    save_inputs=(0, 1),
    save_outputs=(1, 2),
    backward=_gn_bwd,
    samples=_gn_samples,
)


def channel_grads(op: str):
    """The infer of a backward (x, w, mean, rstd, g, ...) -> gx, gw, gb per channel (dim 1)."""

    def infer(x, w, mean, rstd, g, **attrs):
        grad_matches(op, x, g)
        cs = (x.shape[1],)
        return [(tuple(x.shape), x.dtype), (cs, x.dtype), (cs, x.dtype)]

    return infer


def _np_group_norm_backward(x, w, mean, rstd, g, groups, affine, need):
    n, c = x.shape[:2]
    shape = (1, c) + (1,) * (x.ndim - 2)
    xh = ((x.reshape(n, groups, -1) - mean[..., None]) * rstd[..., None]).reshape(x.shape)
    gh = (g * w.reshape(shape) if affine[0] else g).reshape(n, groups, -1)
    xg = xh.reshape(n, groups, -1)
    gx = rstd[..., None] * (
        gh - gh.mean(-1, keepdims=True) - xg * (gh * xg).mean(-1, keepdims=True)
    )
    dims = (0,) + tuple(range(2, x.ndim))
    return gx.reshape(x.shape), (g * xh).sum(dims), g.sum(dims)


def _gn_bwd_samples():
    out = []
    for i, (shape, groups, affine) in enumerate(_GN_CASES[:3] + [((70, 4, 3), 2, (True, True))]):
        x = uniform(*shape, seed=i + 120) * 2 + 0.5
        w = uniform(shape[1], seed=i + 130)
        _, mean, rstd = _np_group_norm(x, w, w, groups, 1e-5, affine)
        g = uniform(*shape, seed=i + 140)
        out.append(
            _backward_sample(
                x, w, mean, rstd, g, _np_group_norm_backward, groups=groups, affine=affine
            )
        )
    return out


GROUP_NORM_BACKWARD = defop(
    "native_group_norm_backward",
    infer=channel_grads("native_group_norm_backward"),
    samples=_gn_bwd_samples,
)


def native_group_norm(x, groups: int, w, b, eps: float):
    """(out, mean, rstd) of group_norm of a host tensor x [N, C, *] (w, b: None or C values),
    one C pass per (sample, group)."""
    c = x.shape[1]
    return apply(
        GROUP_NORM,
        x.contiguous(),
        w.contiguous() if w is not None else _standin(c, x),
        b.contiguous() if b is not None else _standin(c, x),
        groups=groups,
        eps=float(eps),
        affine=(w is not None, b is not None),
    )


def fast_group(x, groups, w, b, eps):
    """group_norm of host tensors in one C call (cpu/python/fastpath_nn.c), the graph recorded
    as native_group_norm's; None when the lane does not take them."""
    if (CAPTURE[0] is not None and capturing()) or AUTOCAST[0] is not None or type(x) is not Tensor:
        return None
    graph = _needs_graph(x, w, b)
    res = _fast_gn(x, groups, w, b, eps, graph)
    if res is None or not graph:
        return res
    c = x.shape[1]
    ins = (x, w if w is not None else _standin(c, x), b if b is not None else _standin(c, x))
    attrs = {"groups": groups, "eps": float(eps), "affine": (w is not None, b is not None)}
    record(GROUP_NORM, ins, res, attrs)
    return res[0]
