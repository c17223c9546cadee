"""Option checks shared by the optimizers, with PyTorch's messages, and the implementation flags
(``foreach``, ``fused``, ``capturable``, ``differentiable``) every PyTorch optimizer accepts.

gpucore accepts the flags and records them in the param groups, as PyTorch does, so that
scripts and state dicts carry over; they do not change the arithmetic (the group update is
already one multi-tensor call where a fused kernel exists), except ``capturable=True`` for
Adam, AdamW, Adamax, NAdam, RAdam, RMSprop and Adadelta on device parameters: the step count
then lives on the device, so that a captured step (``gpucore.vulkan.graph``) replays correctly
(``_capturable.py``). Any with capturable=False refuses to be captured.
"""

from __future__ import annotations

# option -> the words of PyTorch's "Invalid ...: value" message; each must be >= 0.
_NON_NEGATIVE = {
    "lr": "learning rate",
    "eps": "epsilon value",
    "momentum": "momentum value",
    "weight_decay": "weight_decay value",
    "alpha": "alpha value",
    "lr_decay": "lr_decay value",
    "initial_accumulator_value": "initial_accumulator_value value",
    "momentum_decay": "momentum_decay value",
}


def check_options(o: dict) -> None:
    """Raise ValueError (PyTorch's message) for a negative rate, epsilon, decay or momentum, a rho
    outside [0, 1] or betas outside [0, 1); RuntimeError for contradictory flags."""
    for name, words in _NON_NEGATIVE.items():
        if name in o and not 0.0 <= o[name]:
            raise ValueError(f"Invalid {words}: {o[name]}")
    if "rho" in o and not 0.0 <= o["rho"] <= 1.0:
        raise ValueError(f"Invalid rho value: {o['rho']}")
    if "betas" in o:
        betas = o["betas"]
        if len(betas) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        for i, b in enumerate(betas):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {b}")
    if o.get("fused"):
        if o.get("differentiable"):
            raise RuntimeError("`fused` does not support `differentiable`")
        if o.get("foreach"):
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def grad_of(p, grad, group: dict, decay: bool = True):
    """The gradient an update uses: negated with ``maximize``, plus ``weight_decay * p`` (coupled
    L2 decay) when ``decay`` and the group has one. A new tensor whenever it differs from
    ``grad``; ``grad`` itself is never written."""
    g = grad.neg() if group.get("maximize") else grad
    wd = group.get("weight_decay", 0.0)
    if decay and wd != 0:
        g = g.add(p, alpha=wd)
    return g


def lerp_(a, b, w: float):
    """``a = a + w * (b - a)`` in place, in PyTorch's two-sided form (exact at w = 1)."""
    if w < 0.5:
        a.add_(b - a, alpha=w)
    else:
        a.copy_(b - (b - a).mul_(1.0 - w))
    return a
