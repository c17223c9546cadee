"""Optimizer steps a captured graph can replay (``capturable=True``, as PyTorch's).

A captured step (``gpucore.vulkan.graph``) replays the commands recorded once, so nothing the
host computes per step may change what they do. The fused update kernels take the step count and
the bias corrections as host numbers baked into the recording; here instead the step count is a
float32 0-d tensor on the parameter's device (``state['step']``, as PyTorch keeps it with
``capturable=True``) and the scalars that depend on it are computed there, in PyTorch's
capturable arithmetic (``torch.optim.adam._single_tensor_adam``)::

    step += 1
    bias_correction1 = 1 - beta1 ** step;  bias_correction2 = 1 - beta2 ** step
    step_size_neg = -(lr / bias_correction1)
    denom = sqrt(v) / (sqrt(bias_correction2) * step_size_neg) + eps / step_size_neg
    param += m / denom

The same code runs eagerly and in a capture, so a replay equals the eager step bit for bit. Host
parameters take the host path whatever the flag (there is nothing to capture on the host).
"""

from __future__ import annotations

from .. import dispatch
from .. import dtypes as D
from ..creation import tensor as _tensor
from ..graphs import state as _graphs
from ..tensor import Tensor
from ._options import lerp_


def refuse_uncapturable(opt, group: dict) -> None:
    """Inside a capture: raise for a group whose updates would not replay (PyTorch raises
    likewise for ``capturable=False``)."""
    if not _graphs.capturing():
        return
    name = type(opt).__name__
    if "capturable" in group and not group["capturable"]:
        raise RuntimeError(
            f"{name}.step() is being captured in a gpucore.vulkan.VulkanGraph but its "
            "param_groups' capturable is False: its step counts and bias corrections are host "
            "numbers that a replay would not advance. Create the optimizer with "
            f"{name}(..., capturable=True)"
        )
    if group.get("capturable") and not getattr(opt, "_device_steps", False):
        raise RuntimeError(
            f"{name}.step() with capturable=True cannot be captured yet: gpucore keeps device "
            "step counts for Adam and AdamW; use one of them (or SGD) in a captured step"
        )


def device_steps(group: dict, params: list) -> bool:
    """Whether the group's updates take the capturable path: capturable=True and every
    parameter on a device."""
    if not group.get("capturable"):
        return False
    for p in params:
        if p._dev is None:
            return False
    return True


def step_tensor(state: dict, p: Tensor) -> Tensor:
    """state['step'] as a float32 0-d tensor on p's device (converted from the int count a fresh
    or loaded state holds)."""
    step = state.get("step")
    if isinstance(step, Tensor) and step._dev is p._dev and step._dtype is D.float32:
        return step
    if _graphs.capturing():
        raise RuntimeError(
            "an optimizer's state was created inside a captured graph (its first step, or its "
            "first capturable step): a replay would start it from scratch every time. Warm up "
            "first: run a few eager steps (optimizer.step()) before capturing"
        )
    count = float(step.item()) if isinstance(step, Tensor) else float(step or 0)
    t = _tensor(count, dtype=D.float32).to(p.device)
    state["step"] = t
    return t


def adam_step(opt, group: dict, params: list) -> None:
    """One capturable Adam / AdamW step of ``params`` (all on the device; see the module
    docstring), every op on the device whatever its size."""
    beta1, beta2 = (float(b) for b in group["betas"])
    lr, eps = float(group["lr"]), float(group["eps"])
    wd = float(group["weight_decay"])
    with dispatch.device_policy("vulkan"):
        for p in params:
            state = opt.state[p]
            step = step_tensor(state, p)
            exp_avg = opt._buffer(state, "exp_avg", p)[0]
            exp_avg_sq = opt._buffer(state, "exp_avg_sq", p)[0]
            vmax = opt._buffer(state, "max_exp_avg_sq", p)[0] if group["amsgrad"] else None
            step.add_(1.0)
            g = p.grad.neg() if group["maximize"] else p.grad
            if wd != 0:
                if group["decoupled_weight_decay"]:
                    p.mul_(1.0 - lr * wd)
                else:
                    g = g.add(p, alpha=wd)
            lerp_(exp_avg, g, 1.0 - beta1)
            exp_avg_sq.mul_(beta2).add_(g * g, alpha=1.0 - beta2)
            bias_correction1 = 1.0 - beta1**step
            bias_correction2 = 1.0 - beta2**step
            step_size_neg = (lr / bias_correction1).neg()
            v = exp_avg_sq
            if vmax is not None:
                vmax.copy_(vmax.maximum(exp_avg_sq))
                v = vmax
            denom = v.sqrt() / (bias_correction2.sqrt() * step_size_neg) + eps / step_size_neg
            p.add_(exp_avg / denom)
