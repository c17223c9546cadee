"""RMSprop (torch.optim.RMSprop): centered, momentum, weight decay, maximize."""

from __future__ import annotations

from ..ops.optim import RMSPROP_STEP, fused_update
from ._capturable import device_steps, rmsprop_step
from ._options import check_options
from .optimizer import Optimizer


class RMSprop(Optimizer):
    """RMSprop, as ``torch.optim.RMSprop``::

        g = -grad if maximize else grad
        g = g + weight_decay * p                       (weight_decay != 0)
        v = alpha * v + (1 - alpha) * g * g
        avg = sqrt(v - g_avg**2) + eps, g_avg = lerp(g_avg, g, 1 - alpha)  (centered)
        avg = sqrt(v) + eps                            (otherwise)
        buf = momentum * buf + g / avg; p = p - lr * buf   (momentum > 0)
        p = p - lr * g / avg                           (otherwise)

    ``capturable``, ``foreach`` and ``differentiable`` are accepted as in PyTorch (see
    ``gpucore.optim._options``). State per parameter: ``step`` (int; with capturable=True and
    device parameters a float32 0-d device tensor, as Adam's), ``square_avg``,
    ``momentum_buffer`` (momentum > 0) and ``grad_avg`` (centered). One fused kernel per
    parameter (``rmsprop_step``); the host float32 / float64 parameters of a group in one C call
    (``rmsprop_step_multi``).
    """

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        defaults = dict(
            lr=lr,
            alpha=alpha,
            eps=eps,
            weight_decay=weight_decay,
            momentum=momentum,
            centered=centered,
            capturable=capturable,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
        )
        _validate(defaults)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        _validate(group)

    def _tensors(self, p, grad, group, state=None):
        """(param, grad, square_avg[, grad_avg][, momentum_buffer]) and the step count after this
        update (stored by the caller once the update ran)."""
        if state is None:
            state = self.state[p]
        step = int(state.setdefault("step", 0)) + 1
        tensors = [p, grad, self._buffer(state, "square_avg", p)[0]]
        if group["centered"]:
            tensors.append(self._buffer(state, "grad_avg", p)[0])
        if float(group["momentum"]) > 0:
            tensors.append(self._buffer(state, "momentum_buffer", p)[0])
        return tensors, step

    @staticmethod
    def _attrs(group):
        return dict(
            lr=float(group["lr"]),
            alpha=float(group["alpha"]),
            eps=float(group["eps"]),
            weight_decay=float(group["weight_decay"]),
            momentum=float(group["momentum"]),
            centered=bool(group["centered"]),
            maximize=bool(group["maximize"]),
        )

    def _update(self, p, grad, group):
        tensors, step = self._tensors(p, grad, group)
        fused_update(RMSPROP_STEP, *tensors, **self._attrs(group))
        self.state[p]["step"] = step

    _device_steps = True  # capturable=True keeps step counts on the device (_capturable.py)

    def _step_group(self, group, params):
        if device_steps(group, params):
            rmsprop_step(self, group, params)
        else:
            self._step_counted_group(RMSPROP_STEP, group, params, pass_steps=False)


def _validate(o: dict) -> None:
    check_options(o)
