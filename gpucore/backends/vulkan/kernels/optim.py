"""Vulkan kernels: fused optimizer updates (shaders/optim.comp), one dispatch per parameter.

In-place ops (gpucore/ops/optim.py): ``out`` is None; the parameter (first input) and its
state buffers (every input but grad) are updated in place. They arrive contiguous and resident on
this device (``fused_update`` sees to it); grad is contiguous. float32 only (the default
``accepts`` rule): float64 parameters run in the C kernel.
"""

from __future__ import annotations

import math

import numpy as np

from .... import _cpu
from .common import groups_1d, kernel, launch, local_size

# optim.comp's VARIANT (specialization constant 1) and push flags, from cpu/opcodes.def
_VARIANT, _FLAG = _cpu.OPCODES["optim_variant"], _cpu.OPCODES["optim_flag"]
SGD, ADAM, RMSPROP = _VARIANT["SGD"], _VARIANT["ADAM"], _VARIANT["RMSPROP"]
MAXIMIZE, WEIGHT_DECAY, MOMENTUM, NESTEROV = (
    _FLAG[k] for k in ("MAXIMIZE", "WEIGHT_DECAY", "MOMENTUM", "NESTEROV")
)
FIRST, DECOUPLED, AMSGRAD, CENTERED = (
    _FLAG[k] for k in ("FIRST", "DECOUPLED", "AMSGRAD", "CENTERED")
)
_WORDS = 15  # optim.comp's push-constant block: 7 uints, then 8 floats


def _push_optim(be, arrays, flags, lr, wd, decay, h0=0.0, h1=0.0, h2=0.0, h3=0.0, h4=0.0):
    """optim.comp's push block: n, p_off, g_off, s0_off, s1_off, s2_off, flags | lr, wd, decay,
    h0..h4 (unused state buffers get offset 0)."""
    offs = [be.operand(a).offset for a in arrays] + [0] * (5 - len(arrays))
    push = np.empty(_WORDS, np.uint32)
    push[0] = arrays[0].size
    push[1:6] = offs
    push[6] = flags
    push[7:].view(np.float32)[:] = (lr, wd, decay, h0, h1, h2, h3, h4)
    return push


def _inplace_only(out, name):
    if out is not None:
        raise TypeError(
            f"{name} updates its inputs in place and has no output; run it with "
            "gpucore.ops.optim.fused_update, not apply()"
        )


def _launch(be, variant, arrays, push):
    n = arrays[0].size
    if n == 0:
        return
    # unused state bindings get a read-only dummy: the gradient
    bound = [(arrays[0], True), (arrays[1], False)]
    bound += [(a, True) for a in arrays[2:]]
    bound += [(arrays[1], False)] * (5 - len(arrays))
    launch(be, "optim", (variant,), bound, push, groups_1d(n, local_size(be)))


@kernel("sgd_step")
def _sgd_step(
    be, out, param, grad, *buf, lr, momentum, dampening, weight_decay, nesterov, maximize, first
):
    _inplace_only(out, "sgd_step")
    flags = (
        (MAXIMIZE if maximize else 0)
        | (WEIGHT_DECAY if weight_decay != 0 else 0)
        | (MOMENTUM if momentum != 0 else 0)
        | (NESTEROV if nesterov else 0)
        | (FIRST if first else 0)
    )
    arrays = [param, grad] + list(buf[:1] if momentum != 0 else ())
    push = _push_optim(be, arrays, flags, lr, weight_decay, 1.0, momentum, 1.0 - dampening)
    _launch(be, SGD, arrays, push)


@kernel("adam_step")
def _adam_step(
    be,
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
    flags = (
        (MAXIMIZE if maximize else 0)
        | (WEIGHT_DECAY if weight_decay != 0 else 0)
        | (DECOUPLED if decoupled else 0)
        | (AMSGRAD if amsgrad else 0)
    )
    bc1 = 1.0 - beta1**step
    bc2_sqrt = math.sqrt(1.0 - beta2**step)
    arrays = [param, grad, exp_avg, exp_avg_sq] + list(vmax[:1] if amsgrad else ())
    push = _push_optim(
        be,
        arrays,
        flags,
        -(lr / bc1),
        weight_decay,
        1.0 - lr * weight_decay,
        1.0 - beta1,
        beta2,
        1.0 - beta2,
        bc2_sqrt,
        eps,
    )
    _launch(be, ADAM, arrays, push)


@kernel("rmsprop_step")
def _rmsprop_step(
    be,
    out,
    param,
    grad,
    square_avg,
    *rest,
    lr,
    alpha,
    eps,
    weight_decay,
    momentum,
    centered,
    maximize,
):
    _inplace_only(out, "rmsprop_step")
    flags = (
        (MAXIMIZE if maximize else 0)
        | (WEIGHT_DECAY if weight_decay != 0 else 0)
        | (MOMENTUM if momentum > 0 else 0)
        | (CENTERED if centered else 0)
    )
    # bindings: s0 = square_avg, s1 = grad_avg (or dummy), s2 = momentum_buffer (or dummy)
    grad_avg = rest[0] if centered else grad
    buf = rest[-1] if momentum > 0 else grad
    arrays = [param, grad, square_avg, grad_avg, buf]
    push = _push_optim(be, arrays, flags, lr, weight_decay, 1.0, alpha, 1.0 - alpha, eps, momentum)
    n = param.size
    if n == 0:
        return
    bound = [
        (param, True),
        (grad, False),
        (square_avg, True),
        (grad_avg, bool(centered)),
        (buf, momentum > 0),
    ]
    launch(be, "optim", (RMSPROP,), bound, push, groups_1d(n, local_size(be)))


# In-place updates never run widened (backend.py): float16 / bfloat16 parameters take the
# composite path of gpucore/ops/optim.py.
for _fn in (_sgd_step, _adam_step, _rmsprop_step):
    _fn.widen = False
