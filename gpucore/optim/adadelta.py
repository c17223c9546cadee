"""Adadelta (torch.optim.Adadelta): Zeiler's per-coordinate step from running averages."""

from __future__ import annotations

from ..dispatch import device_policy
from ..tensor import Tensor
from ._capturable import count_step, device_steps
from ._options import check_options, grad_of
from .optimizer import Optimizer


class Adadelta(Optimizer):
    """Adadelta, as ``torch.optim.Adadelta``; per parameter, at every step::

        g = -grad if maximize else grad
        g = g + weight_decay * p                          (weight_decay != 0)
        v = rho * v + (1 - rho) * g * g                   (square_avg)
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta           (acc_delta)
        p = p - lr * delta

    State per parameter: ``step`` (int), ``square_avg``, ``acc_delta``. ``foreach``,
    ``capturable`` and ``differentiable`` are accepted as in PyTorch (see
    ``gpucore.optim._options``). The update is written in gpucore tensor ops, in place.
    """

    def __init__(
        self,
        params,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        defaults = dict(
            lr=lr,
            rho=rho,
            eps=eps,
            weight_decay=weight_decay,
            maximize=maximize,
            capturable=capturable,
            foreach=foreach,
            differentiable=differentiable,
        )
        check_options(defaults)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        check_options(group)

    _device_steps = True  # capturable=True keeps step counts on the device (_capturable.py)

    def _step_group(self, group: dict, params: list) -> None:
        if not device_steps(group, params):
            for p in params:
                state = self.state[p]
                state["step"] = int(state.get("step", 0)) + 1
                self._update(p, p.grad, group)
            return
        with device_policy("vulkan"):  # every op on the device, eager as in a capture
            for p in params:
                count_step(self, p)  # the update does not read the count: it replays as is
                self._update(p, p.grad, group)

    def _update(self, p: Tensor, grad: Tensor, group: dict) -> None:
        state = self.state[p]
        square_avg, _ = self._buffer(state, "square_avg", p)
        acc_delta, _ = self._buffer(state, "acc_delta", p)
        rho, eps = float(group["rho"]), float(group["eps"])
        g = grad_of(p, grad, group)
        square_avg.mul_(rho).add_(g * g, alpha=1.0 - rho)
        std = (square_avg + eps).sqrt_()
        delta = (acc_delta + eps).sqrt_().div_(std).mul_(g)
        acc_delta.mul_(rho).add_(delta * delta, alpha=1.0 - rho)
        p.add_(delta, alpha=-float(group["lr"]))
