"""Adagrad (torch.optim.Adagrad): steps scaled by the root of the summed squared gradients."""

from __future__ import annotations

from ..tensor import Tensor
from ._options import check_options, grad_of
from .optimizer import Optimizer


class Adagrad(Optimizer):
    """Adagrad, as ``torch.optim.Adagrad``; at step t (counted per parameter)::

        g = -grad if maximize else grad
        g = g + weight_decay * p                       (weight_decay != 0)
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g                                  (s starts at initial_accumulator_value)
        p = p - clr * g / (sqrt(s) + eps)

    State per parameter, created at construction as in PyTorch: ``step`` (int, 0) and ``sum``.
    ``foreach``, ``fused`` and ``differentiable`` are accepted as in PyTorch (see
    ``gpucore.optim._options``). Sparse gradients are not supported (gpucore has none).
    """

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ):
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            eps=eps,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            fused=fused,
        )
        check_options(defaults)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p: Tensor, group: dict) -> dict:
        state = self.state[p]
        if "sum" not in state:
            state["step"] = int(state.get("step", 0))
            acc, _ = self._buffer(state, "sum", p)
            value = float(group["initial_accumulator_value"])
            if value != 0:
                acc.fill_(value)
        return state

    def _check_group(self, group: dict) -> None:
        check_options(group)

    def _update(self, p: Tensor, grad: Tensor, group: dict) -> None:
        state = self._init_state(p, group)  # a parameter added with add_param_group
        step = int(state["step"]) + 1
        state["step"] = step
        state_sum, _ = self._buffer(state, "sum", p)
        g = grad_of(p, grad, group)
        clr = float(group["lr"]) / (1 + (step - 1) * float(group["lr_decay"]))
        state_sum.add_(g * g)
        std = state_sum.sqrt().add_(float(group["eps"]))
        p.add_(g / std, alpha=-clr)
