"""Adam and AdamW (torch.optim.Adam / torch.optim.AdamW), with amsgrad and maximize."""

from __future__ import annotations

from ..ops.optim import ADAM_STEP, fused_update
from ._capturable import adam_step, device_steps
from ._host_step import host_adam_group
from ._options import check_options
from .optimizer import Optimizer

_BUFFER = Optimizer._buffer


class Adam(Optimizer):
    """Adam, as ``torch.optim.Adam``; at step t (counted per parameter)::

        g = -grad if maximize else grad
        g = g + weight_decay * p          (coupled L2 decay; AdamW instead: p = p * (1 - lr * wd))
        m = beta1 * m + (1 - beta1) * g   (as lerp(m, g, 1 - beta1))
        v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v)             (amsgrad; the denominator uses v_max)
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    State per parameter: ``step`` (int), ``exp_avg``, ``exp_avg_sq`` and, with amsgrad,
    ``max_exp_avg_sq``. One fused kernel per parameter (``adam_step``); the host float32 /
    float64 parameters of a group in one C call (``adam_step_multi``).
    ``decoupled_weight_decay=True`` makes it AdamW. ``foreach``, ``fused``, ``capturable`` and
    ``differentiable`` are accepted as in PyTorch (see ``gpucore.optim._options``).
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ):
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=decoupled_weight_decay,
        )
        _validate(defaults)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        _validate(group)

    def _tensors(self, p, grad, group, state=None):
        """(param, grad, exp_avg, exp_avg_sq[, max_exp_avg_sq]) and the step count after this
        update (stored by the caller once the update ran)."""
        if state is None:
            state = self.state[p]
        step = int(state.setdefault("step", 0)) + 1
        exp_avg, _ = self._buffer(state, "exp_avg", p)
        exp_avg_sq, _ = self._buffer(state, "exp_avg_sq", p)
        tensors = [p, grad, exp_avg, exp_avg_sq]
        if group["amsgrad"]:
            tensors.append(self._buffer(state, "max_exp_avg_sq", p)[0])
        return tensors, step

    @staticmethod
    def _attrs(group):
        beta1, beta2 = group["betas"]
        return dict(
            lr=float(group["lr"]),
            beta1=float(beta1),
            beta2=float(beta2),
            eps=float(group["eps"]),
            weight_decay=float(group["weight_decay"]),
            amsgrad=bool(group["amsgrad"]),
            decoupled=bool(group["decoupled_weight_decay"]),
            maximize=bool(group["maximize"]),
        )

    def _update(self, p, grad, group):
        tensors, step = self._tensors(p, grad, group)
        fused_update(ADAM_STEP, *tensors, step=step, **self._attrs(group))
        self.state[p]["step"] = step

    _device_steps = True  # capturable=True keeps step counts on the device (_capturable.py)

    def _step_group(self, group, params):
        if device_steps(group, params):
            adam_step(self, group, params)
        elif not (_own_gathering(type(self)) and host_adam_group(self, group, params)):
            self._step_counted_group(ADAM_STEP, group, params, pass_steps=True)


class AdamW(Adam):
    """Adam with decoupled weight decay, as ``torch.optim.AdamW`` (weight_decay defaults to
    0.01): each step first scales the parameter by ``1 - lr * weight_decay``; the gradient is
    not decayed."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ):
        super().__init__(
            params,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )


def _own_gathering(cls) -> bool:
    """Whether ``cls`` gathers a parameter's tensors as Adam does (host_adam_group inlines
    _tensors, _buffer and _attrs: a subclass overriding one takes the general path)."""
    return cls._tensors is Adam._tensors and cls._buffer is _BUFFER and cls._attrs is Adam._attrs


def _validate(o: dict) -> None:
    check_options(o)
