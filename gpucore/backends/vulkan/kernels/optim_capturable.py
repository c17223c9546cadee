"""Vulkan kernels of ``adam_step_capturable`` and ``optim_step_capturable``
(gpucore/ops/optim_capturable.py): Adam / AdamW (shaders/adam_capturable.comp) and Adamax / NAdam
/ RAdam (shaders/optim_capturable.comp) with the step count read from a device tensor, one
dispatch per parameter (NAdam: one more, of one invocation, advancing mu_product), so that a
captured step replays correctly. In place: ``out`` is None; the parameter and its state buffers
are updated; the step tensor (float32, one element) is read."""

from __future__ import annotations

import math

from .... import _cpu
from .common import _push, groups_1d, kernel, launch, local_size
from .optim import AMSGRAD, DECOUPLED, MAXIMIZE, WEIGHT_DECAY, _inplace_only


@kernel("adam_step_capturable")
def _adam_step_capturable(
    be,
    out,
    param,
    grad,
    exp_avg,
    exp_avg_sq,
    *rest,
    lr,
    beta1,
    beta2,
    eps,
    weight_decay,
    amsgrad,
    decoupled,
    maximize,
):
    _inplace_only(out, "adam_step_capturable")
    step = rest[-1]
    vmax = rest[0] if amsgrad else exp_avg_sq  # bound read-only-in-effect when unused
    n = param.size
    if n == 0:
        return
    flags = (
        (MAXIMIZE if maximize else 0)
        | (WEIGHT_DECAY if weight_decay != 0 else 0)
        | (DECOUPLED if decoupled else 0)
        | (AMSGRAD if amsgrad else 0)
    )
    arrays = (param, grad, exp_avg, exp_avg_sq, vmax, step)
    offs = [be.operand(a).offset for a in arrays]
    push = _push(
        n,
        *offs,
        flags,
        float(lr),
        float(weight_decay),
        float(1.0 - lr * weight_decay),
        float(1.0 - beta1),
        float(beta2),
        float(1.0 - beta2),
        float(math.log(beta1)) if beta1 > 0 else -math.inf,
        float(math.log(beta2)) if beta2 > 0 else -math.inf,
        float(eps),
    )
    operands = [(param, True), (grad, False), (exp_avg, True), (exp_avg_sq, True)]
    operands += [(vmax, bool(amsgrad)), (step, False)]
    launch(be, "adam_capturable", (), operands, push, groups_1d(n, local_size(be)))


# ----------------------------------------------------------------------------- Adamax/NAdam/RAdam
_VARIANT = _cpu.OPCODES["optim_variant"]  # optim_capturable.comp's VARIANT (cpu/opcodes.def)
VARIANTS = {k: _VARIANT[k.upper()] for k in ("adamax", "nadam", "radam")}
NADAM_MU = _VARIANT["NADAM_MU"]


def _log(b: float) -> float:
    return math.log(b) if b > 0 else -math.inf


def radam_constants(beta2: float) -> tuple:
    """(rho_inf - 2 / L, rho_inf / ((rho_inf - 4) (rho_inf - 2))) with L = -log(beta2): the
    step-independent parts of RAdam's rho_t and rectification (optim_capturable.comp)."""
    if beta2 <= 0:
        return (-1.0, 0.0)  # rho_inf = 1: rho_t <= 1, never rectified
    big_l = -math.log(beta2)
    rho_inf = 2.0 / (1.0 - beta2) - 1.0
    c0 = rho_inf - 2.0 / big_l  # about L / 6: float64 keeps it to ~1e-13 of rho_inf
    den = (rho_inf - 4.0) * (rho_inf - 2.0)
    return (c0, rho_inf / den if den != 0 else 0.0)


@kernel("optim_step_capturable")
def _optim_step_capturable(
    be,
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
    _inplace_only(out, "optim_step_capturable")
    n = param.size
    mu_arr = mu[0] if mu else step  # bound read-only-in-effect when unused
    flags = (
        (MAXIMIZE if maximize else 0)
        | (WEIGHT_DECAY if weight_decay != 0 else 0)
        | (DECOUPLED if decoupled else 0)
    )
    c0 = c1 = 0.0
    if kind == "nadam":
        c0 = momentum_decay * math.log(0.96)
    elif kind == "radam":
        c0, c1 = radam_constants(beta2)
    arrays = (param, grad, s1, s2, step, mu_arr)
    offs = [be.operand(a).offset for a in arrays]
    push = _push(
        n,
        *offs,
        flags,
        float(lr),
        float(weight_decay),
        float(1.0 - lr * weight_decay),
        float(1.0 - beta1),
        float(beta1),
        float(beta2),
        float(1.0 - beta2),
        float(_log(beta1)),
        float(_log(beta2)),
        float(eps),
        float(c0),
        float(c1),
    )
    operands = [(param, True), (grad, False), (s1, True), (s2, True), (step, False)]
    if kind == "nadam":
        operands.append((mu_arr, True))
        launch(be, "optim_capturable", (NADAM_MU,), operands, push, (1, 1, 1))
    else:
        operands.append((mu_arr, False))
    if n:
        groups = groups_1d(n, local_size(be))
        launch(be, "optim_capturable", (VARIANTS[kind],), operands, push, groups)
