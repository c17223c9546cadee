"""Optimizer steps a captured graph can replay (``capturable=True``, as PyTorch's).

A captured step (``gpucore.vulkan.graph``) replays the commands recorded once, so nothing the
host computes per step may change what they do. The fused ``adam_step`` kernel takes the step
count and the bias corrections as host numbers baked into the recording; with
``capturable=True`` and device parameters the step count is instead a float32 0-d tensor on the
parameter's device (``state['step']``, as PyTorch keeps it) and the update is
``adam_step_capturable`` (gpucore/ops/optim_capturable.py): one dispatch per parameter that reads
the count and computes 1 - beta^t on the device, after a one-element ``step += 1``. Adamax,
NAdam and RAdam likewise run ``optim_step_capturable`` (shaders/optim_capturable.comp; NAdam's
``mu_product`` is a device tensor too, advanced by the kernel); RMSprop's and Adadelta's updates
do not depend on the count, so only the count moves onto the device. Adagrad, SGD and LBFGS take
no ``capturable`` argument, as in PyTorch (SGD has no step count and captures as it is).

The same code runs eagerly and in a capture, so a replay equals the eager step bit for bit. Host
parameters take the host path whatever the flag (there is nothing to capture on the host).
"""

from __future__ import annotations

from .. import dispatch
from .. import dtypes as D
from ..creation import tensor as _tensor
from ..graphs import state as _graphs
from ..ops.optim import RMSPROP_STEP, fused_update
from ..ops.optim_capturable import capturable_step, capturable_update
from ..tensor import Tensor


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
            f"{name}.step() with capturable=True cannot be captured: gpucore keeps device step "
            "counts for Adam, AdamW, Adamax, NAdam, RAdam, RMSprop and Adadelta; use one of "
            "them (or SGD) in a captured step"
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


def step_tensor(state: dict, p: Tensor, key: str = "step", start: float = 0.0) -> Tensor:
    """state[key] (the step count, or NAdam's mu_product) as a float32 0-d tensor on p's device
    (converted from the number a fresh or loaded state holds; ``start`` when absent)."""
    step = state.get(key)
    if isinstance(step, Tensor) and step._dev is p._dev and step._dtype is D.float32:
        return step
    if _graphs.capturing():
        raise RuntimeError(
            "an optimizer's state was created inside a captured graph (its first step, or its "
            "first capturable step): a replay would start it from scratch every time. Warm up "
            "first: run a few eager steps (optimizer.step()) before capturing"
        )
    if step is None:
        step = start
    count = float(step.item()) if isinstance(step, Tensor) else float(step)
    t = _tensor(count, dtype=D.float32).to(p.device)
    state[key] = t
    return t


def adam_step(opt, group: dict, params: list) -> None:
    """One capturable Adam / AdamW step of ``params`` (all on the device): per parameter, the
    device step count is incremented and ``adam_step_capturable`` runs (one dispatch each)."""
    beta1, beta2 = (float(b) for b in group["betas"])
    attrs = dict(
        lr=float(group["lr"]),
        beta1=beta1,
        beta2=beta2,
        eps=float(group["eps"]),
        weight_decay=float(group["weight_decay"]),
        amsgrad=bool(group["amsgrad"]),
        decoupled=bool(group["decoupled_weight_decay"]),
        maximize=bool(group["maximize"]),
    )
    with dispatch.device_policy("vulkan"):  # the 0-d count too, whatever its size
        for p in params:
            state = opt.state[p]
            step = step_tensor(state, p)
            tensors = [p, p.grad, opt._buffer(state, "exp_avg", p)[0]]
            tensors.append(opt._buffer(state, "exp_avg_sq", p)[0])
            if attrs["amsgrad"]:
                tensors.append(opt._buffer(state, "max_exp_avg_sq", p)[0])
            step.add_(1.0)
            capturable_update(*tensors, step, **attrs)


def rmsprop_step(opt, group: dict, params: list) -> None:
    """One capturable RMSprop step: its update does not depend on the count, so the fused
    ``rmsprop_step`` kernel replays as recorded; only the count moves onto the device."""
    attrs = opt._attrs(group)
    with dispatch.device_policy("vulkan"):  # the 0-d count too, whatever its size
        for p in params:
            state = opt.state[p]
            step = step_tensor(state, p)
            tensors = [p, p.grad, opt._buffer(state, "square_avg", p)[0]]
            if group["centered"]:
                tensors.append(opt._buffer(state, "grad_avg", p)[0])
            if float(group["momentum"]) > 0:
                tensors.append(opt._buffer(state, "momentum_buffer", p)[0])
            step.add_(1.0)
            fused_update(RMSPROP_STEP, *tensors, **attrs)


def more_step(opt, group: dict, params: list, kind: str) -> None:
    """One capturable Adamax / NAdam / RAdam step (``kind``): per parameter, the device step
    count is incremented and ``optim_step_capturable`` runs (one dispatch; NAdam one more, of one
    invocation, advancing its device mu_product)."""
    beta1, beta2 = (float(b) for b in group["betas"])
    attrs = dict(
        kind=kind,
        lr=float(group["lr"]),
        beta1=beta1,
        beta2=beta2,
        eps=float(group["eps"]),
        weight_decay=float(group["weight_decay"]),
        decoupled=bool(group.get("decoupled_weight_decay", False)),
        maximize=bool(group["maximize"]),
        momentum_decay=float(group.get("momentum_decay", 0.0)),
    )
    names = ("exp_avg", "exp_inf") if kind == "adamax" else ("exp_avg", "exp_avg_sq")
    with dispatch.device_policy("vulkan"):  # the 0-d count too, whatever its size
        for p in params:
            state = opt.state[p]
            step = step_tensor(state, p)
            tensors = [p, p.grad] + [opt._buffer(state, n, p)[0] for n in names]
            tensors.append(step)
            if kind == "nadam":
                tensors.append(step_tensor(state, p, "mu_product", 1.0))
            step.add_(1.0)
            capturable_step(*tensors, **attrs)


def count_step(opt, p: Tensor) -> None:
    """Advance p's device step count (optimizers whose update does not depend on it: Adadelta;
    the update itself, in tensor ops, replays as recorded)."""
    with dispatch.device_policy("vulkan"):
        step_tensor(opt.state[p], p).add_(1.0)
