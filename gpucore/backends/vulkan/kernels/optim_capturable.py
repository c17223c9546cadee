"""Vulkan kernel of ``adam_step_capturable`` (gpucore/ops/optim_capturable.py): Adam / AdamW with
the step count read from a device tensor (shaders/adam_capturable.comp), one dispatch per
parameter, so that a captured step replays correctly. In place: ``out`` is None; param, exp_avg,
exp_avg_sq (and max_exp_avg_sq) are updated; the step tensor (float32, one element) is read."""

from __future__ import annotations

import math

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
