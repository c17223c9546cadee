"""RAdam (torch.optim.RAdam): Adam with a rectified (variance-corrected) adaptive step."""

from __future__ import annotations

import math

from ..tensor import Tensor
from ._adam_like import AdamLike
from ._options import check_options, lerp_


class RAdam(AdamLike):
    """RAdam, as ``torch.optim.RAdam``; at step t (counted per parameter)::

        g = -grad if maximize else grad
        p = p * (1 - lr * weight_decay)           (decoupled_weight_decay: RAdamW)
        g = g + weight_decay * p                  (otherwise, when weight_decay != 0)
        m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) * g * g
        m_hat = m / (1 - beta1**t)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
        if rho_t > 5:
            r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
            p = p - lr * m_hat * sqrt(1 - beta2**t) / (sqrt(v) + eps) * r
        else:
            p = p - lr * m_hat                    (SGD with momentum while the variance is
                                                    not yet tractable)

    State per parameter: ``step`` (int), ``exp_avg``, ``exp_avg_sq``. ``foreach``,
    ``capturable`` and ``differentiable`` are accepted as in PyTorch (see
    ``gpucore.optim._options``).
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ):
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            decoupled_weight_decay=decoupled_weight_decay,
            differentiable=differentiable,
        )
        check_options(defaults)
        super().__init__(params, defaults)

    _kind = "radam"

    def _update(self, p: Tensor, grad: Tensor, group: dict) -> None:
        _, step, exp_avg, exp_avg_sq, g = self._start(p, grad, group)
        lr, eps = float(group["lr"]), float(group["eps"])
        beta1, beta2 = (float(b) for b in group["betas"])

        lerp_(exp_avg, g, 1.0 - beta1)
        exp_avg_sq.mul_(beta2).add_(g * g, alpha=1.0 - beta2)
        bias_correction1 = 1.0 - beta1**step
        bias_correction2 = 1.0 - beta2**step
        m_hat = exp_avg / bias_correction1
        rho_inf = 2.0 / (1.0 - beta2) - 1.0
        rho_t = rho_inf - 2.0 * step * (beta2**step) / bias_correction2
        if rho_t > 5.0:
            rect = math.sqrt(
                (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
            )
            adaptive = math.sqrt(bias_correction2) / exp_avg_sq.sqrt().add_(eps)
            p.add_(m_hat * lr * adaptive * rect, alpha=-1.0)
        else:
            p.add_(m_hat * lr, alpha=-1.0)
