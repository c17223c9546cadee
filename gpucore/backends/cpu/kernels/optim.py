"""Optimizer kernels (gpucore/ops/optim.py): in-place updates. ``out`` is None; the kernel
updates the parameter (first input) and its state buffers (every input but grad) in place,
float32/float64 in C (cpu/optim.c)."""

from __future__ import annotations

import math

import numpy as np

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


def _radam_rho(step: float, beta2: float) -> float:
    """RAdam's rho_t in float64, in optim_capturable.comp's cancellation-free form (the direct
    rho_inf - 2 t b2^t / (1 - b2^t) subtracts two numbers near 2 / (1 - b2))."""
    if beta2 <= 0:
        return 1.0  # rho_inf = 1: never rectified
    big_l = -math.log(beta2)

    def f(y):  # 1 / expm1(y) - 1 / y
        return 1.0 / math.expm1(y) - 1.0 / y

    return 1.0 + 2.0 * f(big_l) - 2.0 * step * f(step * big_l)


@kernel("optim_step_capturable")
def _optim_step_capturable(
    out,
    param,
    grad,
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
    """Adamax / NAdam / RAdam with the step count (and NAdam's mu_product) read from one-element
    arrays, in place, in the parameter's dtype with float64 scalars; the scalars as the Vulkan
    shader forms them (bias corrections by expm1, rho_t without cancellation). NAdam's
    mu_product is multiplied by mu_t first, as the shader does."""
    _inplace_only(out, "optim_step_capturable")
    t = float(step.reshape(-1)[0])
    g = -grad if maximize else grad.copy()
    if weight_decay and decoupled and kind != "adamax":
        param *= 1 - lr * weight_decay
    elif weight_decay:
        g += weight_decay * param
    s1 += (g - s1) * (1 - beta1)  # lerp(m, g, 1 - beta1)
    bc1 = -math.expm1(t * math.log(beta1)) if beta1 > 0 else 1.0
    if kind == "adamax":
        np.maximum(s2 * beta2, np.abs(g) + eps, out=s2)
        param -= (lr / bc1) * (s1 / s2)
        return
    s2 *= beta2
    s2 += (1 - beta2) * g * g
    bc2 = -math.expm1(t * math.log(beta2)) if beta2 > 0 else 1.0
    if kind == "nadam":

        def mu_of(x):
            return beta1 * (1 - 0.5 * math.exp(x * momentum_decay * math.log(0.96)))

        mu_t, mu_next = mu_of(t), mu_of(t + 1)
        mu[0].reshape(-1)[0] *= mu_t
        prod = float(mu[0].reshape(-1)[0])
        denom = np.sqrt(s2 / bc2) + eps
        param -= (lr * (1 - mu_t) / (1 - prod)) * (g / denom)
        param -= (lr * mu_next / (1 - prod * mu_next)) * (s1 / denom)
        return
    rho_t = _radam_rho(t, beta2)
    if rho_t > 5:
        rho_inf = 2 / (1 - beta2) - 1
        rect = math.sqrt(
            (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
        )
        param -= (s1 / bc1) * lr * (math.sqrt(bc2) / (np.sqrt(s2) + eps)) * rect
    else:
        param -= (s1 / bc1) * lr
