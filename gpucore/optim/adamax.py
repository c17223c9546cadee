"""Adamax (torch.optim.Adamax): Adam with an infinity-norm second moment."""

from __future__ import annotations

from ..ops.elementwise import maximum
from ..tensor import Tensor
from ._capturable import device_steps, more_step
from ._options import check_options, grad_of, lerp_
from .optimizer import Optimizer


class Adamax(Optimizer):
    """Adamax, as ``torch.optim.Adamax``; at step t (counted per parameter)::

        g = -grad if maximize else grad
        g = g + weight_decay * p                      (weight_decay != 0)
        m = lerp(m, g, 1 - beta1)                     (exp_avg)
        u = max(beta2 * u, |g| + eps)                 (exp_inf)
        p = p - lr / (1 - beta1**t) * m / u

    State per parameter: ``step`` (int), ``exp_avg``, ``exp_inf``. ``foreach``, ``capturable``
    and ``differentiable`` are accepted as in PyTorch (see ``gpucore.optim._options``).
    """

    def __init__(
        self,
        params,
        lr: float = 2e-3,
        betas: tuple = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ):
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        check_options(defaults)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        check_options(group)

    _device_steps = True  # capturable=True keeps step counts on the device (_capturable.py)

    def _step_group(self, group: dict, params: list) -> None:
        if device_steps(group, params):
            more_step(self, group, params, "adamax")
        else:
            super()._step_group(group, params)

    def _update(self, p: Tensor, grad: Tensor, group: dict) -> None:
        state = self.state[p]
        step = int(state.get("step", 0)) + 1
        state["step"] = step
        exp_avg, _ = self._buffer(state, "exp_avg", p)
        exp_inf, _ = self._buffer(state, "exp_inf", p)
        beta1, beta2 = (float(b) for b in group["betas"])
        g = grad_of(p, grad, group)
        lerp_(exp_avg, g, 1.0 - beta1)
        exp_inf.mul_(beta2)
        exp_inf.copy_(maximum(exp_inf, g.abs().add_(float(group["eps"]))))
        clr = float(group["lr"]) / (1.0 - beta1**step)
        p.add_(exp_avg / exp_inf, alpha=-clr)
