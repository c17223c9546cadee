"""``adam_step_capturable``: Adam / AdamW whose step count is a tensor (PyTorch's
``capturable=True``), so that an update recorded once into a captured graph (gpucore.vulkan.graph)
computes its bias corrections from the current count at every replay.

Inputs, in order: param, grad, exp_avg, exp_avg_sq[, max_exp_avg_sq (amsgrad)], step, where
step is a one-element floating tensor (float32 for the Vulkan kernel) holding the count *after*
this update (the caller increments it first; the kernel only reads it). attrs: lr, beta1, beta2,
eps, weight_decay, amsgrad, decoupled (AdamW), maximize. The arithmetic is ``adam_step``'s
(gpucore/ops/optim.py); the Vulkan kernel (shaders/adam_capturable.comp) computes
1 - beta^step on the device in float32, the CPU kernel reads the count and runs cpu/optim.c's
update (bias corrections in float64). In place, no autograd; versions of the written tensors
are bumped, as ``fused_update`` does.
"""

from __future__ import annotations

import numpy as np

from .. import dispatch
from ..autograd.grad_mode import no_grad
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .elementwise import to_device
from .optim import _np_adam, _run_cpu, _run_device
from .registry import defop
from .samples import Sample, uniform


def _infer(param, grad, exp_avg, exp_avg_sq, *rest, amsgrad, **attrs):
    name = "adam_step_capturable"
    want = 6 if amsgrad else 5
    got = 4 + len(rest)
    if got != want:
        raise ValueError(
            f"{name}: expected {want} tensors (param, grad, exp_avg, exp_avg_sq"
            f"{', max_exp_avg_sq' if amsgrad else ''}, step), got {got}"
        )
    step = rest[-1]
    if not param.dtype.is_floating_point:
        raise DTypeError(f"{name}: the parameter must be a floating tensor, got {param.dtype}")
    for nm, t in zip(
        ("grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"),
        (grad,) + (exp_avg, exp_avg_sq) + rest[:-1],
    ):
        if t.shape != param.shape or t.dtype is not param.dtype:
            raise ShapeError(
                f"{name}: {nm} is {t.dtype}{list(t.shape)} but the parameter is "
                f"{param.dtype}{list(param.shape)}; every buffer has the parameter's shape and "
                "dtype"
            )
    if step.numel() != 1 or not step.dtype.is_floating_point:
        raise ShapeError(
            f"{name}: step must be a one-element floating tensor (the count), got "
            f"{step.dtype}{list(step.shape)}"
        )
    return (param.shape, param.dtype)


ADAM_STEP_CAPTURABLE = defop("adam_step_capturable", infer=_infer, samples=lambda: _samples())


def capturable_update(*tensors: Tensor, **attrs) -> None:
    """Run ``adam_step_capturable`` on (param, grad, exp_avg, exp_avg_sq[, max], step): on the
    parameter's device when it has the kernel, else in the C kernel. No autograd."""
    _update_in_place(ADAM_STEP_CAPTURABLE, tensors, tensors[2:-1], tensors[-1], attrs)


def _update_in_place(op, tensors: tuple, states: tuple, step: Tensor, attrs: dict) -> None:
    """Run ``op`` on ``tensors`` in place: on the parameter's device when the parameter, the
    written ``states`` and the ``step`` count all live there (contiguous) and it has the kernel,
    else in the C kernel; then bump the written tensors' versions."""
    param = tensors[0]
    specs = op.infer(*tensors, **attrs)
    written = (param, *states)
    home = param._dev
    on_device = (
        home is not None
        and all(t._dev is home and t._data.flags.c_contiguous for t in written)
        and step._dev is home
        and home.supports(op, tensors, specs)
    )
    if on_device:
        _run_device(home, op, tensors, attrs)
    else:
        _run_cpu(op, tensors, attrs)
    if dispatch._trace.records is not None:
        dispatch.record(op.name, home.name if on_device else "cpu", param.shape)
    for t in written:
        t._vbox[0] += 1


def _call(op, *tensors, **attrs):
    dev = "vulkan" if dispatch.get_device_policy() == "vulkan" else "cpu"
    with no_grad():
        ts = [to_device(t, dev) for t in tensors]
        capturable_update(*ts, **attrs)
    return (ts[0],) + tuple(ts[2:-1])


def _ref(p, g, m, v, *rest, **attrs):
    return _np_adam(p, g, m, v, *rest[:-1], step=int(round(float(rest[-1]))), **attrs)


def _samples():
    base = {
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
        ((3, 5), 1, {}),
        ((3, 5), 5, {"weight_decay": 0.1, "amsgrad": True}),
        ((2, 7), 3, {"weight_decay": 0.01, "decoupled": True, "maximize": True}),
        ((5000,), 10, {"beta1": 0.5, "beta2": 0.9}),
    ]
    out = []
    for i, (shape, step, a) in enumerate(cases):
        attrs = {**base, **a}
        bufs = [uniform(*shape, seed=10 * i), uniform(*shape, low=0.0, high=1.0, seed=10 * i + 3)]
        if attrs["amsgrad"]:
            bufs.append(uniform(*shape, low=0.0, high=1.0, seed=10 * i + 4))
        out.append(
            Sample(
                uniform(*shape, seed=10 * i + 1),
                uniform(*shape, seed=10 * i + 2),
                *bufs,
                np.array(float(step)),
                ref=_ref,
                call=_call,
                grad=False,
                **attrs,
            )
        )
    return out


# ----------------------------------------------------------------------------- Adamax/NAdam/RAdam
_KINDS = ("adamax", "nadam", "radam")


def _infer_more(param, grad, s1, s2, step, *mu, kind, **attrs):
    name = "optim_step_capturable"
    if kind not in _KINDS:
        raise ValueError(f"{name}: kind must be one of {_KINDS}, got {kind!r}")
    if len(mu) != (kind == "nadam"):
        raise ValueError(
            f"{name}: {kind} takes (param, grad, {_STATE[kind]}, step"
            f"{', mu_product' if kind == 'nadam' else ''}), got {5 + len(mu)} tensors"
        )
    if not param.dtype.is_floating_point:
        raise DTypeError(f"{name}: the parameter must be a floating tensor, got {param.dtype}")
    for nm, t in zip(("grad", *_STATE[kind].split(", ")), (grad, s1, s2)):
        if t.shape != param.shape or t.dtype is not param.dtype:
            raise ShapeError(
                f"{name}: {nm} is {t.dtype}{list(t.shape)} but the parameter is "
                f"{param.dtype}{list(param.shape)}; every buffer has the parameter's shape and "
                "dtype"
            )
    for nm, t in zip(("step", "mu_product"), (step, *mu)):
        if t.numel() != 1 or not t.dtype.is_floating_point:
            raise ShapeError(
                f"{name}: {nm} must be a one-element floating tensor, got {t.dtype}{list(t.shape)}"
            )
    return (param.shape, param.dtype)


_STATE = {
    "adamax": "exp_avg, exp_inf",
    "nadam": "exp_avg, exp_avg_sq",
    "radam": "exp_avg, exp_avg_sq",
}

OPTIM_STEP_CAPTURABLE = defop(
    "optim_step_capturable", infer=_infer_more, samples=lambda: _samples_more()
)


def capturable_step(*tensors: Tensor, **attrs) -> None:
    """Run ``optim_step_capturable`` (Adamax / NAdam / RAdam, ``attrs['kind']``) on (param, grad,
    state1, state2, step[, mu_product]): one dispatch on the parameter's device when it has the
    kernel, else the CPU kernel. ``step`` holds the count after this update (the caller
    increments it); NAdam's ``mu_product`` is multiplied by mu_t here, before the update reads
    it. No autograd."""
    _update_in_place(OPTIM_STEP_CAPTURABLE, tensors, tensors[2:4] + tensors[5:], tensors[4], attrs)


def np_optim_step(
    p,
    g,
    s1,
    s2,
    step,
    *mu,
    kind,
    lr,
    beta1,
    beta2,
    eps,
    weight_decay,
    decoupled,
    maximize,
    momentum_decay,
):
    """PyTorch's single-tensor Adamax / NAdam / RAdam update in float64 (the samples' reference):
    (param, state1, state2[, mu_product])."""
    t = float(np.asarray(step).reshape(-1)[0])
    g = -g if maximize else g
    if weight_decay and decoupled and kind != "adamax":
        p = p * (1 - lr * weight_decay)
    elif weight_decay:
        g = g + weight_decay * p
    m = beta1 * s1 + (1 - beta1) * g
    if kind == "adamax":
        u = np.maximum(beta2 * s2, np.abs(g) + eps)
        return (p - lr / (1 - beta1**t) * m / u, m, u)
    v = beta2 * s2 + (1 - beta2) * g * g
    bc2 = 1 - beta2**t
    if kind == "nadam":
        mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = beta1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        prod = float(np.asarray(mu[0]).reshape(-1)[0]) * mu_t
        denom = np.sqrt(v / bc2) + eps
        p = p - lr * (1 - mu_t) / (1 - prod) * g / denom
        p = p - lr * mu_next / (1 - prod * mu_next) * m / denom
        return (p, m, v, np.array(prod).reshape(np.shape(mu[0])))
    m_hat = m / (1 - beta1**t)
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * t * beta2**t / bc2
    if rho_t > 5:
        rect = np.sqrt(
            (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
        )
        return (p - lr * m_hat * np.sqrt(bc2) / (np.sqrt(v) + eps) * rect, m, v)
    return (p - lr * m_hat, m, v)


def _call_more(op, *tensors, **attrs):
    dev = "vulkan" if dispatch.get_device_policy() == "vulkan" else "cpu"
    with no_grad():
        ts = [to_device(t, dev) for t in tensors]
        capturable_step(*ts, **attrs)
    return (ts[0], ts[2], ts[3]) + tuple(ts[5:])


def _samples_more():
    base = dict(
        lr=0.01,
        beta1=0.9,
        beta2=0.999,
        eps=1e-8,
        weight_decay=0.0,
        decoupled=False,
        maximize=False,
        momentum_decay=4e-3,
    )
    cases = [
        ("adamax", (3, 5), 1, {}),
        ("adamax", (2, 7), 4, {"weight_decay": 0.1, "maximize": True}),
        ("nadam", (3, 5), 1, {}),
        ("nadam", (5000,), 7, {"weight_decay": 0.01, "decoupled": True}),
        ("radam", (3, 5), 2, {}),  # rho_t <= 5: the momentum-only step
        ("radam", (2, 7), 9, {"weight_decay": 0.1, "maximize": True}),
        ("radam", (5000,), 30, {"weight_decay": 0.1, "decoupled": True, "beta2": 0.99}),
    ]
    out = []
    for i, (kind, shape, step, a) in enumerate(cases):
        attrs = {**base, **a, "kind": kind}
        mu = (np.array(0.7),) if kind == "nadam" else ()
        out.append(
            Sample(
                uniform(*shape, seed=20 * i + 1),
                uniform(*shape, seed=20 * i + 2),
                uniform(*shape, seed=20 * i),
                uniform(*shape, low=0.05, high=1.0, seed=20 * i + 3),
                np.array(float(step)),
                *mu,
                ref=np_optim_step,
                call=_call_more,
                grad=False,
                **attrs,
            )
        )
    return out
