"""Fused optimizer updates: ``sgd_step``, ``adam_step``, ``rmsprop_step``.

Each is one registry op whose kernel updates a parameter and its state buffers in place, in one
pass (one C call on the CPU, one dispatch on the Vulkan device), with PyTorch's arithmetic. They
have no autograd: ``fused_update`` runs them under no_grad and bumps the version counter of every
tensor it modifies, so a graph that saved one of them reports the modification at backward.

Inputs, in order (all of the parameter's shape and dtype; grad is the only one read-only):

- sgd_step(param, grad[, momentum_buffer]); the buffer is present when momentum != 0.
  attrs: lr, momentum, dampening, weight_decay, nesterov, maximize, first (the buffer starts as
  the gradient, as PyTorch's first step with momentum).
- adam_step(param, grad, exp_avg, exp_avg_sq[, max_exp_avg_sq]); the last when amsgrad.
  attrs: step (the count after this update), lr, beta1, beta2, eps, weight_decay, amsgrad,
  decoupled (AdamW), maximize.
- rmsprop_step(param, grad, square_avg[, grad_avg][, momentum_buffer]); grad_avg when centered,
  the buffer when momentum > 0. attrs: lr, alpha, eps, weight_decay, momentum, centered, maximize.

Where it runs: the dispatch policy picks the backend as for any op, and the update then runs
where its tensors live, because it writes them: a parameter on the Vulkan device is updated by
the device kernel (whatever its size, unless the policy is 'cpu'); a host parameter by the C
kernel. float16 / bfloat16 parameters, and parameters or buffers that are not contiguous, take a
composite path written in gpucore ops (computed in float32, rounded back on write).

Many parameters at once: ``foreach_update`` runs one op over a list of parameters (an optimizer's
param group). The parameters whose update would run in the C kernel anyway (host float32 /
float64 tensors, contiguous, the gradient in the parameter's dtype) go through ONE multi-tensor C
call (``sgd_step_multi``, ``adam_step_multi``, ``rmsprop_step_multi``), bitwise the same as one
``fused_update`` each but without the per-parameter Python path (tens of microseconds each); the
others take ``fused_update``.

kernels: backends/cpu/kernels/optim.py (cpu/optim.c), backends/vulkan/kernels/optim.py
(shaders/optim.comp).
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _cpu, dispatch
from .. import dtypes as D
from ..autograd.grad_mode import no_grad
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .elementwise import maximum, to_device
from .registry import defop
from .samples import Sample, uniform

_FUSED_DTYPES = (D.float32, D.float64)
# Number of buffers each op takes for given attrs (param and grad included).
_ARITY = {
    "sgd_step": lambda a: 3 if a["momentum"] != 0 else 2,
    "adam_step": lambda a: 5 if a["amsgrad"] else 4,
    "rmsprop_step": lambda a: 3 + bool(a["centered"]) + (a["momentum"] > 0),
}


def _infer(name):
    def infer(param, grad, *state, **attrs):
        want = _ARITY[name](attrs)
        # every step of every parameter comes here: the check that passes is kept cheap
        shape, dt = param._data.shape, param._dtype
        ok = 2 + len(state) == want and dt.is_floating_point
        if ok and grad._data.shape == shape and grad._dtype is dt:
            for t in state:
                if t._data.shape != shape or t._dtype is not dt:
                    break
            else:
                return (param.shape, dt)
        if 2 + len(state) != want:
            raise ValueError(
                f"{name}: expected {want} tensors (param, grad and {want - 2} state buffers) for "
                f"these options, got {2 + len(state)}"
            )
        if not param.dtype.is_floating_point:
            raise DTypeError(f"{name}: the parameter must be a floating tensor, got {param.dtype}")
        names = ("grad",) + tuple(f"state buffer {i}" for i in range(len(state)))
        for nm, t in zip(names, (grad,) + state):
            if t.shape != param.shape:
                raise ShapeError(
                    f"{name}: {nm} has shape {tuple(t.shape)} but the parameter has shape "
                    f"{tuple(param.shape)}; every tensor of an update has the parameter's shape"
                )
            if t.dtype is not param.dtype:
                raise DTypeError(
                    f"{name}: {nm} is {t.dtype} but the parameter is {param.dtype}; every tensor "
                    "of an update has the parameter's dtype"
                )
        return (param.shape, param.dtype)

    return infer


# samples: see the end of this module
SGD_STEP = defop("sgd_step", infer=_infer("sgd_step"), samples=lambda: _sgd_samples())
ADAM_STEP = defop("adam_step", infer=_infer("adam_step"), samples=lambda: _adam_samples())
RMSPROP_STEP = defop(
    "rmsprop_step", infer=_infer("rmsprop_step"), samples=lambda: _rmsprop_samples()
)


# ----------------------------------------------------------------------------- running
def fused_update(op, *tensors: Tensor, **attrs) -> None:
    """Run the in-place update ``op`` on (param, grad, *state): modifies param and the state
    buffers, bumps their version counters. No autograd."""
    param, grad = tensors[0], tensors[1]
    if grad.dtype is not param.dtype:
        with no_grad():
            grad = grad.to(param.dtype)
        tensors = (param, grad) + tensors[2:]
    specs = op.infer(*tensors, **attrs)
    dispatch.place_update(op, tensors, attrs)  # under 'auto', may move them onto the device
    written = (param,) + tensors[2:]
    contiguous = True
    for t in written:
        if not t._data.flags.c_contiguous:
            contiguous = False
            break
    if param._dtype not in _FUSED_DTYPES or not contiguous:
        with no_grad():
            _COMPOSITE[op.name](*tensors, **attrs)  # copy_ bumps the versions itself
        return
    be = _backend(op, tensors, written, specs)
    t0 = time.perf_counter() if dispatch.profiling[0] else None
    if be is dispatch.CPU:
        _run_cpu(op, tensors, attrs)
    else:
        _run_device(be, op, tensors, attrs)
    if t0 is not None:
        dispatch.profile_event(op.name, be.name, time.perf_counter() - t0)
    if dispatch._trace.records is not None:
        dispatch.record(op.name, be.name, param.shape)
    for t in written:
        t._vbox[0] += 1


def _backend(op, tensors, written, specs):
    """The policy's choice, adjusted to where the written tensors live (an in-place update runs
    where its data is)."""
    be = dispatch.backend_for(op, tensors, specs)
    if be is not dispatch.CPU:
        return be if all(t._dev is be for t in written) else dispatch.CPU
    home = tensors[0]._dev
    if (
        home is not None
        and dispatch.get_device_policy() != "cpu"
        and all(t._dev is home for t in written)
        and home.supports(op, tensors, specs)
    ):
        return home
    return dispatch.CPU


def _run_cpu(op, tensors, attrs):
    """The C kernel on host arrays of ``tensors``; device-resident ones are written through the
    backend's host-write protocol (wait for pending work, write, push back)."""
    arrays = []
    on_dev = []
    for i, t in enumerate(tensors):
        if t._dev is None:
            a = t._data
        else:
            if i != 1:
                t._dev.before_host_write(t._data)
                on_dev.append(t)
            a = t._dev.host_view(t._data)
        if i == 1 and not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        arrays.append(a)
    dispatch.CPU.run_inplace(op, arrays, attrs)
    for t in on_dev:
        t._dev.after_host_write(t._data)


def _run_device(be, op, tensors, attrs):
    arrays = [t._data for t in tensors]
    grad = be.to_device(tensors[1])  # the gradient may still be on the host, or strided
    arrays[1] = grad if grad.flags.c_contiguous else be.clone_array(grad)
    be.run_inplace(op, arrays, attrs)


# ----------------------------------------------------------------------------- many parameters
def foreach_arrays(tensors) -> list | None:
    """The host arrays of one update (param, grad, *state) for a multi-tensor C call, or None when
    it must take ``fused_update``: a tensor on a device, a parameter that is not float32 /
    float64 or not contiguous, a gradient or state buffer of another dtype, a state buffer of
    another shape. A non-contiguous gradient is copied, as ``_run_cpu`` does. A host update
    always runs in the C kernel whatever the policy (it runs where the written tensors live), so
    no backend choice is needed.

    This runs for every parameter at every step, so it checks only what can differ in practice
    and is cheap to test here; the C entry checks everything again (element counts, contiguity
    of the state buffers, which the optimizers keep contiguous) and refuses the whole call before
    writing anything, and ``foreach_update`` then falls back to ``fused_update``."""
    param, grad = tensors[0], tensors[1]
    dt = param._dtype
    pa, ga = param._data, grad._data
    if (
        (dt is not D.float32 and dt is not D.float64)
        or param._dev is not None
        or grad._dev is not None
        or grad._dtype is not dt
        or not pa.flags.c_contiguous
    ):
        return None
    if not ga.flags.c_contiguous:
        ga = np.ascontiguousarray(ga)
    arrays = [pa, ga]
    shape = pa.shape
    for t in tensors[2:]:
        a = t._data
        if t._dev is not None or t._dtype is not dt or a.shape != shape:
            return None
        arrays.append(a)
    return arrays


def _sgd_multi(cols, n, *, lr, momentum, dampening, weight_decay, nesterov, maximize, first):
    # first: one flag per parameter (a buffer created by this step starts as the gradient)
    flag = first[0] if all(f == first[0] for f in first) else None
    _cpu.sgd_step_multi(
        cols[0],
        cols[1],
        cols[2] if n > 2 else None,
        lr,
        momentum,
        dampening,
        weight_decay,
        int(nesterov),
        int(maximize),
        int(flag) if flag is not None else [int(f) for f in first],
    )


def _adam_multi(
    cols, n, *, step, lr, beta1, beta2, eps, weight_decay, amsgrad, decoupled, maximize
):
    _cpu.adam_step_multi(
        cols[0],
        cols[1],
        cols[2],
        cols[3],
        cols[4] if amsgrad else None,
        step,
        lr,
        beta1,
        beta2,
        eps,
        weight_decay,
        int(decoupled),
        int(maximize),
    )


def _rmsprop_multi(cols, n, *, lr, alpha, eps, weight_decay, momentum, centered, maximize):
    _cpu.rmsprop_step_multi(
        cols[0],
        cols[1],
        cols[2],
        cols[3] if centered else None,
        cols[-1] if momentum > 0 else None,
        lr,
        alpha,
        eps,
        weight_decay,
        momentum,
        int(maximize),
    )


_MULTI = {"sgd_step": _sgd_multi, "adam_step": _adam_multi, "rmsprop_step": _rmsprop_multi}


def foreach_update(op, batch, per: dict | None = None, **attrs) -> None:
    """Run the in-place update ``op`` over many parameters: ``batch`` is a list of tensor tuples
    (param, grad, *state), all with the same state buffers (one param group), ``attrs`` the shared
    options and ``per`` maps an option that differs per parameter (Adam's ``step``, SGD's
    ``first``) to its list of values. The same result as ``fused_update`` on each tuple in turn,
    bumping the same version counters; the tuples must not repeat a parameter.

    The updates that ``foreach_arrays`` accepts go to one multi-tensor C call (the others first,
    one ``fused_update`` each). A profiler sees one event for that call; a ``trace_ops()``
    block one record per parameter, as with ``fused_update``."""
    per = per or {}
    want = _ARITY[op.name](attrs)
    fast, rows = [], []
    for i, tensors in enumerate(batch):
        if len(tensors) == want:
            dispatch.place_update(op, tensors, attrs)  # then fused_update runs it on the device
        arrays = foreach_arrays(tensors) if len(tensors) == want else None
        if arrays is None:  # (a wrong number of buffers: fused_update raises its error)
            fused_update(op, *tensors, **attrs, **{k: v[i] for k, v in per.items()})
        else:
            fast.append(i)
            rows.append(arrays)
    if not fast:
        return
    cols = [list(c) for c in zip(*rows)]
    kw = dict(attrs)
    for k, v in per.items():
        kw[k] = [v[i] for i in fast] if len(fast) != len(batch) else list(v)
    t0 = time.perf_counter() if dispatch.profiling[0] else None
    try:
        _MULTI[op.name](cols, want, **kw)
    except ValueError:
        # The C entry checks everything before it writes anything. What foreach_arrays passed
        # and it refuses is memory shared between parameters (views of one array), which the
        # per-parameter path updates one after the other, or a buffer that is not contiguous or
        # not of the parameter's size, which fused_update handles or reports as it always did.
        for i in fast:
            fused_update(op, *batch[i], **attrs, **{k: v[i] for k, v in per.items()})
        return
    if t0 is not None:
        dispatch.profile_event(op.name, dispatch.CPU.name, time.perf_counter() - t0)
    recording = dispatch._trace.records is not None
    for i in fast:
        tensors = batch[i]
        tensors[0]._vbox[0] += 1
        for t in tensors[2:]:
            t._vbox[0] += 1
        if recording:
            dispatch.record(op.name, dispatch.CPU.name, tensors[0].shape)


# ----------------------------------------------------------------------------- composites
# The same arithmetic in gpucore ops, for dtypes and layouts the kernels do not take: computed in
# float32 (float64 for float64 parameters) and written back with copy_ (which rounds).
def _work(t: Tensor) -> Tensor:
    return t.to(D.float64 if t.dtype is D.float64 else D.float32)


def _lerp(a, b, w):
    return a + (b - a) * w if w < 0.5 else b - (b - a) * (1.0 - w)


def _sgd_composite(
    param, grad, *buf, lr, momentum, dampening, weight_decay, nesterov, maximize, first
):
    p, g = _work(param), _work(grad)
    if maximize:
        g = -g
    if weight_decay != 0:
        g = g + p * weight_decay
    if momentum != 0:
        b = g if first else _work(buf[0]) * momentum + g * (1.0 - dampening)
        buf[0].copy_(b)
        g = g + b * momentum if nesterov else b
    param.copy_(p + g * (-lr))


def _adam_composite(
    param,
    grad,
    exp_avg,
    exp_avg_sq,
    *vmax,
    step,
    lr,
    beta1,
    beta2,
    eps,
    weight_decay,
    amsgrad,
    decoupled,
    maximize,
):
    p, g = _work(param), _work(grad)
    if maximize:
        g = -g
    if weight_decay != 0:
        if decoupled:
            p = p * (1.0 - lr * weight_decay)
        else:
            g = g + p * weight_decay
    m = _lerp(_work(exp_avg), g, 1.0 - beta1)
    v = _work(exp_avg_sq) * beta2 + g * g * (1.0 - beta2)
    exp_avg.copy_(m)
    exp_avg_sq.copy_(v)
    if amsgrad:
        v = maximum(_work(vmax[0]), v)
        vmax[0].copy_(v)
    bc1 = 1.0 - beta1**step
    bc2_sqrt = math.sqrt(1.0 - beta2**step)
    denom = v.sqrt() / bc2_sqrt + eps
    param.copy_(p + m * (-(lr / bc1)) / denom)


def _rmsprop_composite(
    param, grad, square_avg, *rest, lr, alpha, eps, weight_decay, momentum, centered, maximize
):
    p, g = _work(param), _work(grad)
    if maximize:
        g = -g
    if weight_decay != 0:
        g = g + p * weight_decay
    s = _work(square_avg) * alpha + g * g * (1.0 - alpha)
    square_avg.copy_(s)
    rest = list(rest)
    if centered:
        gavg = rest.pop(0)
        ga = _lerp(_work(gavg), g, 1.0 - alpha)
        gavg.copy_(ga)
        avg = (s - ga * ga).sqrt()
    else:
        avg = s.sqrt()
    avg = avg + eps
    if momentum > 0:
        buf = rest.pop(0)
        b = _work(buf) * momentum + g / avg
        buf.copy_(b)
        param.copy_(p + b * (-lr))
    else:
        param.copy_(p + g * (-lr) / avg)


_COMPOSITE = {
    "sgd_step": _sgd_composite,
    "adam_step": _adam_composite,
    "rmsprop_step": _rmsprop_composite,
}


# ----------------------------------------------------------------------------- samples
# References: the update rules in PyTorch's documentation of torch.optim.SGD, Adam/AdamW and
# RMSprop, in float64 numpy. Each returns the parameter and the state buffers after one step.
def _np_sgd(p, g, *buf, lr, momentum, dampening, weight_decay, nesterov, maximize, first):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    if momentum == 0:
        return p - lr * g
    b = g if first else momentum * buf[0] + (1 - dampening) * g
    return p - lr * (g + momentum * b if nesterov else b), b


def _np_adam(
    p, g, m, v, *vmax, step, lr, beta1, beta2, eps, weight_decay, amsgrad, decoupled, maximize
):
    g = -g if maximize else g
    if weight_decay and decoupled:
        p = p * (1 - lr * weight_decay)
    elif weight_decay:
        g = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    vhat = np.maximum(vmax[0], v) if amsgrad else v
    denom = np.sqrt(vhat) / np.sqrt(1 - beta2**step) + eps
    p = p - lr / (1 - beta1**step) * m / denom
    return (p, m, v) + ((vhat,) if amsgrad else ())


def _np_rmsprop(p, g, sq, *rest, lr, alpha, eps, weight_decay, momentum, centered, maximize):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    sq = alpha * sq + (1 - alpha) * g * g
    state, var = [sq], sq
    if centered:
        ga = alpha * rest[0] + (1 - alpha) * g
        state.append(ga)
        var = sq - ga * ga
    avg = np.sqrt(var) + eps
    if momentum > 0:
        b = momentum * rest[-1] + g / avg
        state.append(b)
        return (p - lr * b, *state)
    return (p - lr * g / avg, *state)


def _step(transposed=False):
    """Sample.call of an update: fused_update on copies of the tensors (on the Vulkan device
    under the 'vulkan' policy: an update runs where its tensors live); (param, *state) after.
    transposed: non-contiguous views of them, which take the composite path."""

    def call(op, *tensors, **attrs):
        dev = "vulkan" if dispatch.get_device_policy() == "vulkan" else "cpu"
        ts = [to_device(t, dev) for t in tensors]
        if transposed:
            ts = [t.mT for t in ts]
        fused_update(op, *ts, **attrs)
        out = (ts[0],) + tuple(ts[2:])
        return tuple(t.mT for t in out) if transposed else out

    return call


def _step_samples(ref, cases, buffers):
    """One sample per (shape, attrs) case: param, grad and buffers(attrs, shape, seed) as
    inputs; a 5000-element case exceeds the GPU threshold; a (4, 3) case, run on transposed
    views, takes the composite path (gpucore ops, not the Vulkan kernel: on_vulkan=False)."""
    out = []
    for i, (shape, attrs) in enumerate(cases):
        bufs = buffers(attrs, shape, 10 * i)
        transposed = shape == (4, 3)
        out.append(
            Sample(
                uniform(*shape, seed=10 * i + 1),
                uniform(*shape, seed=10 * i + 2),
                *bufs,
                ref=ref,
                call=_step(transposed),
                on_vulkan=not transposed,
                **attrs,
            )
        )
    return out


def _sgd_samples():
    base = {
        "lr": 0.1,
        "momentum": 0.0,
        "dampening": 0.0,
        "weight_decay": 0.0,
        "nesterov": False,
        "maximize": False,
        "first": False,
    }
    cases = [
        ((3, 5), {}),
        ((3, 5), {"momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01, "first": True}),
        ((2, 7), {"momentum": 0.9, "nesterov": True, "maximize": True, "weight_decay": 0.1}),
        ((4, 3), {"momentum": 0.5, "dampening": 0.5}),
        ((5000,), {"momentum": 0.9}),
    ]
    return _step_samples(
        _np_sgd,
        [(sh, {**base, **a}) for sh, a in cases],
        lambda a, sh, seed: [uniform(*sh, seed=seed)] if a["momentum"] else [],
    )


def _adam_samples():
    base = {
        "step": 1,
        "lr": 0.01,
        "beta1": 0.9,
        "beta2": 0.999,
        "eps": 1e-8,
        "weight_decay": 0.0,
        "amsgrad": False,
        "decoupled": False,
        "maximize": False,
    }
    cases = [
        ((3, 5), {}),
        ((3, 5), {"step": 5, "weight_decay": 0.1, "amsgrad": True}),
        ((2, 7), {"step": 3, "weight_decay": 0.01, "decoupled": True, "maximize": True}),
        ((4, 3), {"step": 2, "amsgrad": True, "beta1": 0.5, "beta2": 0.9}),
        ((5000,), {"step": 10}),
    ]

    def buffers(a, sh, seed):  # exp_avg, exp_avg_sq (>= 0)[, max_exp_avg_sq (>= 0)]
        return [uniform(*sh, seed=seed), uniform(*sh, low=0.0, high=1.0, seed=seed + 3)] + (
            [uniform(*sh, low=0.0, high=1.0, seed=seed + 4)] if a["amsgrad"] else []
        )

    return _step_samples(_np_adam, [(sh, {**base, **a}) for sh, a in cases], buffers)


def _rmsprop_samples():
    base = {
        "lr": 0.01,
        "alpha": 0.99,
        "eps": 1e-8,
        "weight_decay": 0.0,
        "momentum": 0.0,
        "centered": False,
        "maximize": False,
    }
    cases = [
        ((3, 5), {}),
        ((3, 5), {"centered": True, "momentum": 0.9, "weight_decay": 0.1}),
        ((2, 7), {"momentum": 0.5, "maximize": True, "alpha": 0.9}),
        ((2, 7), {"centered": True, "eps": 1e-3}),
        ((4, 3), {"centered": True, "momentum": 0.9}),
        ((5000,), {"centered": True, "momentum": 0.9}),
    ]

    def buffers(a, sh, seed):  # square_avg above grad_avg**2: the centered variance is positive
        return (
            [uniform(*sh, low=1.0, high=2.0, seed=seed)]
            + ([uniform(*sh, low=-0.5, high=0.5, seed=seed + 3)] if a["centered"] else [])
            + ([uniform(*sh, seed=seed + 4)] if a["momentum"] else [])
        )

    return _step_samples(_np_rmsprop, [(sh, {**base, **a}) for sh, a in cases], buffers)
