"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize (torch.optim.SGD)."""

from __future__ import annotations

from ..ops.optim import SGD_STEP, foreach_update, fused_update
from ._host_step import host_sgd_group
from ._options import check_options
from .optimizer import Optimizer

_BUFFER = Optimizer._buffer


class SGD(Optimizer):
    """Stochastic gradient descent, as ``torch.optim.SGD``::

        g = -grad if maximize else grad
        g = g + weight_decay * p                     (weight_decay != 0)
        buf = g (first step) or momentum * buf + (1 - dampening) * g   (momentum != 0)
        g = g + momentum * buf if nesterov else buf  (momentum != 0)
        p = p - lr * g

    ``foreach``, ``fused`` and ``differentiable`` are accepted as in PyTorch (see
    ``gpucore.optim._options``). State per parameter: ``momentum_buffer`` (when momentum != 0).
    One fused kernel per parameter (``sgd_step``); the host float32 / float64 parameters of a
    group in one C call (``sgd_step_multi``).
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ):
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
            foreach=foreach,
            differentiable=differentiable,
            fused=fused,
        )
        _validate(defaults)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        _validate(group)

    def _tensors(self, p, grad, group):
        """(param, grad[, momentum_buffer]) and whether the buffer was created for this step."""
        tensors = [p, grad]
        first = False
        if float(group["momentum"]) != 0:
            buf, first = self._buffer(self.state[p], "momentum_buffer", p)
            tensors.append(buf)
        return tensors, first

    @staticmethod
    def _attrs(group):
        return dict(
            lr=float(group["lr"]),
            momentum=float(group["momentum"]),
            dampening=float(group["dampening"]),
            weight_decay=float(group["weight_decay"]),
            nesterov=bool(group["nesterov"]),
            maximize=bool(group["maximize"]),
        )

    def _update(self, p, grad, group):
        tensors, first = self._tensors(p, grad, group)
        fused_update(SGD_STEP, *tensors, **self._attrs(group), first=first)

    def _step_group(self, group, params):
        cls = type(self)
        if (
            cls._tensors is SGD._tensors
            and cls._buffer is _BUFFER
            and cls._attrs is SGD._attrs
            and host_sgd_group(self, group, params)
        ):
            return  # (optim/_host_step.py: the same update in one loop)
        if not self._distinct(params):
            return super()._step_group(group, params)
        batch, first = [], []
        for p in params:
            tensors, f = self._tensors(p, p.grad, group)
            batch.append(tensors)
            first.append(f)
        foreach_update(SGD_STEP, batch, {"first": first}, **self._attrs(group))


def _validate(o: dict) -> None:
    check_options(o)
    if o["nesterov"] and (o["momentum"] <= 0 or o["dampening"] != 0):
        raise ValueError("Nesterov momentum requires a momentum and zero dampening")
