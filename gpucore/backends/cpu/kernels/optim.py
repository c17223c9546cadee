"""Optimizer kernels (gpucore/ops/optim.py): in-place updates. ``out`` is None; the kernel
updates the parameter (first input) and its state buffers (every input but grad) in place,
float32/float64 in C (cpu/optim.c)."""

from __future__ import annotations

from .... import _cpu
from .common import kernel


def _inplace_only(out, name):
    if out is not None:
        raise TypeError(
            f"{name} updates its inputs in place and has no output; run it with "
            "gpucore.ops.optim.fused_update, not apply()"
        )


@kernel("sgd_step")
def _sgd_step(
    out, param, grad, *buf, lr, momentum, dampening, weight_decay, nesterov, maximize, first
):
    _inplace_only(out, "sgd_step")
    _cpu.sgd_step(
        param,
        grad,
        buf[0] if buf else None,
        lr,
        momentum,
        dampening,
        weight_decay,
        int(nesterov),
        int(maximize),
        int(first),
    )


@kernel("adam_step")
def _adam_step(
    out,
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
    _inplace_only(out, "adam_step")
    _cpu.adam_step(
        param,
        grad,
        exp_avg,
        exp_avg_sq,
        vmax[0] if amsgrad else None,
        step,
        lr,
        beta1,
        beta2,
        eps,
        weight_decay,
        int(decoupled),
        int(maximize),
    )


@kernel("adam_step_capturable")
def _adam_step_capturable(out, param, grad, exp_avg, exp_avg_sq, *rest, amsgrad, **attrs):
    # the step count is a one-element tensor (gpucore/ops/optim_capturable.py); it is read here
    _adam_step(
        None,
        param,
        grad,
        exp_avg,
        exp_avg_sq,
        *rest[:-1],
        step=int(rest[-1].reshape(-1)[0]),
        amsgrad=amsgrad,
        **attrs,
    )


@kernel("rmsprop_step")
def _rmsprop_step(
    out, param, grad, square_avg, *rest, lr, alpha, eps, weight_decay, momentum, centered, maximize
):
    _inplace_only(out, "rmsprop_step")
    grad_avg = rest[0] if centered else None
    buf = rest[-1] if momentum > 0 else None
    _cpu.rmsprop_step(
        param,
        grad,
        square_avg,
        grad_avg,
        buf,
        lr,
        alpha,
        eps,
        weight_decay,
        momentum,
        int(maximize),
    )


@kernel("optim_step_capturable")
def _optim_step_capturable(out, param, grad, s1, s2, step, *mu, kind, **attrs):
    """Adamax / NAdam / RAdam with the step count (and NAdam's mu_product) read from one-element
    arrays: PyTorch's update in the parameter's dtype with float64 scalars, in place. NAdam's
    mu_product is multiplied by mu_t first, as the Vulkan kernel does."""
    _inplace_only(out, "optim_step_capturable")
    from ....ops.optim_capturable import np_optim_step  # the ops package imports the kernels

    new = np_optim_step(param, grad, s1, s2, step, *mu, kind=kind, **attrs)
    for dst, val in zip((param, s1, s2) + mu, new):
        dst[...] = val
