"""NAdam (torch.optim.NAdam): Adam with Nesterov momentum and a momentum-decay schedule."""

from __future__ import annotations

from ..tensor import Tensor
from ._adam_like import AdamLike
from ._options import check_options, lerp_


class NAdam(AdamLike):
    """NAdam, as ``torch.optim.NAdam``; at step t (counted per parameter)::

        g = -grad if maximize else grad
        p = p * (1 - lr * weight_decay)           (decoupled_weight_decay: NAdamW)
        g = g + weight_decay * p                  (otherwise, when weight_decay != 0)
        mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay)), mu_{t+1} likewise
        mu_product = mu_product * mu_t            (the product of mu_1 .. mu_t)
        m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) * g * g
        denom = sqrt(v / (1 - beta2**t)) + eps
        p = p - lr * (1 - mu_t) / (1 - mu_product) * g / denom
              - lr * mu_{t+1} / (1 - mu_product * mu_{t+1}) * m / denom

    State per parameter: ``step`` (int), ``mu_product`` (a float; PyTorch keeps a 0-d tensor,
    which ``load_state_dict`` accepts), ``exp_avg``, ``exp_avg_sq``. ``foreach``,
    ``capturable`` and ``differentiable`` are accepted as in PyTorch (see
    ``gpucore.optim._options``).
    """

    _scalar_state = {"step": int, "mu_product": float}

    def __init__(
        self,
        params,
        lr: float = 2e-3,
        betas: tuple = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
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
            momentum_decay=momentum_decay,
            decoupled_weight_decay=decoupled_weight_decay,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
        )
        check_options(defaults)
        super().__init__(params, defaults)

    _kind = "nadam"

    def _update(self, p: Tensor, grad: Tensor, group: dict) -> None:
        state, step, exp_avg, exp_avg_sq, g = self._start(p, grad, group)
        mu_product = float(state.get("mu_product", 1.0))
        lr, eps = float(group["lr"]), float(group["eps"])
        beta1, beta2 = (float(b) for b in group["betas"])
        decay = float(group["momentum_decay"])

        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * decay))
        mu_product *= mu
        state["mu_product"] = mu_product
        mu_product_next = mu_product * mu_next

        lerp_(exp_avg, g, 1.0 - beta1)
        exp_avg_sq.mul_(beta2).add_(g * g, alpha=1.0 - beta2)
        denom = (exp_avg_sq / (1.0 - beta2**step)).sqrt_().add_(eps)
        p.add_(g / denom, alpha=-lr * (1.0 - mu) / (1.0 - mu_product))
        p.add_(exp_avg / denom, alpha=(-lr * mu_next) / (1.0 - mu_product_next))
