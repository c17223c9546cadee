"""Batch normalization with fused kernels, PyTorch's names: native_batch_norm (the values and
each channel's mean and 1 / sqrt(var + eps); in training the running statistics are updated in
place, as PyTorch's) and native_batch_norm_backward (the input, weight and bias gradients in one
pass). gpucore.nn.functional.batch_norm runs them on host tensors; on other devices and while a
graph is captured it stays the composition ``batch_norm_composed``.

Inputs are (x [N, C, *], weight, bias, running_mean, running_var), all but x of C values; attrs
``affine`` (weight given, bias given) and ``running`` (running_mean given, running_var given):
a missing one is a stand-in constant that the kernel ignores. training: the batch's statistics
(biased variance), and ``running = (1 - momentum) * running + momentum * batch`` with the
unbiased variance; eval: the running statistics. The op's kernel writes the running tensors in
place (their version counters are bumped by ``native_batch_norm``); they get no gradient. The
backward is the fused op unless a graph of the gradient is being built (create_graph): then it
is the composition's, which is differentiable again.

kernels: backends/cpu/kernels/norm_batch.py (cpu/norm_batch.c); none on Vulkan.
"""

from __future__ import annotations

import numpy as np

from .. import _cpu
from ..autograd.grad_mode import _state as _grad_state
from ..autograd.grad_mode import no_grad
from ..creation import tensor
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .norm import _backward_sample, _needs_graph, _standin, channel_grads, composed_grads
from .registry import AUTOCAST, CAPTURE, apply, capturing, defop, record
from .samples import Sample, uniform


def _view(x):
    """The shape that broadcasts a [C] vector over dim 1 of x."""
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def batch_norm_composed(x, rm, rv, w, b, training, momentum, eps):
    """batch_norm in gpucore ops (any device, differentiable to any order), updating rm / rv
    (None or [C]) in place in training."""
    c, shape = x.shape[1], _view(x)
    if training:
        dims = (0,) + tuple(range(2, x.ndim))
        count = x.numel() // max(c, 1)
        mean = x.mean(dims, keepdim=True)
        xc = x - mean
        var = (xc * xc).mean(dims, keepdim=True)
        if rm is not None or rv is not None:
            with no_grad():
                m = float(momentum)
                if rm is not None:
                    rm.copy_(rm * (1 - m) + mean.reshape(c) * m)
                if rv is not None:
                    rv.copy_(rv * (1 - m) + var.reshape(c) * (count / (count - 1)) * m)
    else:
        xc = x - rm.to(x.dtype).reshape(shape)
        var = rv.to(x.dtype).reshape(shape)
    scale = (var + eps).rsqrt()
    if w is not None:
        scale = scale * w.reshape(shape)
    out = xc * scale
    return out if b is None else out + b.reshape(shape)


def _bn_infer(x, w, b, rm, rv, training, momentum, eps, affine, running):
    if not x.dtype.is_floating_point:
        raise DTypeError(f"native_batch_norm: expects a floating point input, got {x.dtype}")
    c = x.shape[1] if x.ndim >= 2 else -1
    for name, t in (("weight", w), ("bias", b), ("running_mean", rm), ("running_var", rv)):
        if x.ndim < 2 or tuple(t.shape) != (c,) or t.dtype is not x.dtype:
            raise ShapeError(
                f"native_batch_norm: input {tuple(x.shape)} {x.dtype} [N, C, *] needs {name} "
                f"of C values of its dtype, got {tuple(t.shape)} {t.dtype}"
            )
    if training and x.numel() // max(c, 1) <= 1:
        raise ValueError(
            f"native_batch_norm: expected more than 1 value per channel when training, got "
            f"input of shape {tuple(x.shape)}"
        )
    if not training and not all(running):
        raise ValueError("native_batch_norm: eval needs running_mean and running_var")
    return [(tuple(x.shape), x.dtype), ((c,), x.dtype), ((c,), x.dtype)]


def _bn_bwd(ctx, g):
    x, w, mean, rstd = ctx.saved
    training, affine = ctx.attrs["training"], ctx.attrs["affine"]
    need = ctx.needs_input_grad
    want = (need[0], need[1] and affine[0], need[2] and affine[1])
    if _grad_state.enabled:  # create_graph: the composition's gradient
        wc, eps, shape = (w if affine[0] else None), ctx.attrs["eps"], _view(x)

        def f(x, w):
            if training:
                return batch_norm_composed(x, None, None, wc, None, True, 0.0, eps)
            out = (x - mean.reshape(shape)) * rstd.reshape(shape)
            return out if wc is None else out * w.reshape(shape)

        gx, gw = composed_grads(f, (x, w), want[:2], g)
        gb = g.sum((0,) + tuple(range(2, g.ndim))) if want[2] else None
        return gx, gw, gb, None, None
    gx, gw, gb = apply(
        BATCH_NORM_BACKWARD, x, w, mean, rstd, g, training=training, affine=affine, need=want
    )
    return tuple(t if n else None for t, n in zip((gx, gw, gb), want)) + (None, None)


_fast_bn = _cpu.fast_batch_norm
_RM, _RV = 0.3, 1.7  # the samples' running statistics (every channel)


def _np_batch_norm(x, w, b, training, momentum, eps, affine, running):
    c, shape = x.shape[1], _view(x)
    dims = (0,) + tuple(range(2, x.ndim))
    rm, rv = np.full(c, _RM), np.full(c, _RV)
    if training:
        mean, var = x.mean(dims), x.var(dims)
        cnt = x.size // c
        new_rm = (1 - momentum) * rm + momentum * mean
        new_rv = (1 - momentum) * rv + momentum * var * cnt / (cnt - 1)
    else:
        mean, var, new_rm, new_rv = rm, rv, rm, rv
    rstd = 1 / np.sqrt(var + eps)
    out = (x - mean.reshape(shape)) * rstd.reshape(shape)
    out = out * (w.reshape(shape) if affine[0] else 1) + (b.reshape(shape) if affine[1] else 0)
    return (out, mean, rstd, new_rm if running[0] else rm, new_rv if running[1] else rv)


def _bn_call(op, x, w, b, running, **attrs):
    c = x.shape[1]
    rm = tensor(np.full(c, _RM), dtype=x.dtype)
    rv = tensor(np.full(c, _RV), dtype=x.dtype)
    out = apply(op, x, w, b, rm, rv, running=running, **attrs)
    return tuple(out) + (rm, rv)


_BN_CASES = [
    ((4, 3), True, (True, True), (True, True)),
    ((2, 3, 5), True, (True, False), (True, False)),
    ((3, 2, 2, 3), True, (False, False), (False, False)),
    ((2, 3, 4), False, (True, True), (True, True)),
    ((1, 2, 2, 2, 3), False, (False, True), (True, True)),
]


def _bn_samples():
    out = []
    for i, (shape, training, affine, running) in enumerate(_BN_CASES):
        x = uniform(*shape, seed=i + 150) * 3 + 1
        w, b = uniform(shape[1], seed=i + 160), uniform(shape[1], seed=i + 170)
        out.append(
            Sample(
                x,
                w,
                b,
                training=training,
                momentum=0.1 if i % 2 else 0.3,
                eps=1e-5,
                affine=affine,
                running=running,
                call=_bn_call,
                ref=_np_batch_norm,
            )
        )
    return out


BATCH_NORM = defop(
    "native_batch_norm",
    infer=_bn_infer,
    save_inputs=(0, 1),
    save_outputs=(1, 2),
    backward=_bn_bwd,
    samples=_bn_samples,
)


def _np_batch_norm_backward(x, w, mean, rstd, g, training, affine, need):
    shape = _view(x)
    dims = (0,) + tuple(range(2, x.ndim))
    xh = (x - mean.reshape(shape)) * rstd.reshape(shape)
    gw, gb = (g * xh).sum(dims), g.sum(dims)
    scale = rstd.reshape(shape) * (w.reshape(shape) if affine[0] else 1)
    cnt = x.size // x.shape[1]
    if training:
        gx = scale * (g - gb.reshape(shape) / cnt - xh * gw.reshape(shape) / cnt)
    else:
        gx = scale * g
    return gx, gw, gb


def _bn_bwd_samples():
    out = []
    for i, (shape, training, affine, _) in enumerate(_BN_CASES[:4]):
        x = uniform(*shape, seed=i + 180) * 2 + 0.5
        w = uniform(shape[1], seed=i + 190)
        _, mean, rstd, _, _ = _np_batch_norm(x, w, w, training, 0.1, 1e-5, affine, (True, True))
        g = uniform(*shape, seed=i + 200)
        out.append(
            _backward_sample(
                x, w, mean, rstd, g, _np_batch_norm_backward, training=training, affine=affine
            )
        )
    return out


BATCH_NORM_BACKWARD = defop(
    "native_batch_norm_backward",
    infer=channel_grads("native_batch_norm_backward"),
    samples=_bn_bwd_samples,
)


def native_batch_norm(x, rm, rv, w, b, training: bool, momentum: float, eps: float):
    """batch_norm of a host tensor x [N, C, *] through the fused op: the output; rm / rv (None
    or contiguous [C] tensors of x's dtype) are updated in place in training."""
    c = x.shape[1]
    ins = [t if t is not None else _standin(c, x) for t in (w, b, rm, rv)]
    out = apply(
        BATCH_NORM,
        x.contiguous(),
        *(t.contiguous() for t in ins[:2]),
        *ins[2:],
        training=bool(training),
        momentum=float(momentum),
        eps=float(eps),
        affine=(w is not None, b is not None),
        running=(rm is not None, rv is not None),
    )[0]
    if training:
        for t in (rm, rv):
            if t is not None:
                t._vbox[0] += 1
    return out


def fast_batch_norm(x, rm, rv, w, b, training, momentum, eps):
    """batch_norm of host tensors in one C call (cpu/python/fastpath_nn.c), rm / rv updated in
    place in training and the graph recorded as native_batch_norm's; None when the lane does
    not take them (then nothing was updated)."""
    if (CAPTURE[0] is not None and capturing()) or AUTOCAST[0] is not None or type(x) is not Tensor:
        return None
    graph = _needs_graph(x, w, b)
    res = _fast_bn(x, w, b, rm, rv, training, momentum, eps, graph)
    if res is None:
        return None
    if training:
        for t in (rm, rv):
            if t is not None:
                t._vbox[0] += 1
    if not graph:
        return res
    c = x.shape[1]
    ins = (x,) + tuple(t if t is not None else _standin(c, x) for t in (w, b, rm, rv))
    attrs = {
        "training": bool(training),
        "momentum": float(momentum),
        "eps": float(eps),
        "affine": (w is not None, b is not None),
        "running": (rm is not None, rv is not None),
    }
    record(BATCH_NORM, ins, res, attrs)
    return res[0]
