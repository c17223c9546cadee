"""Weight averaging, as torch.optim.swa_utils: ``AveragedModel`` (stochastic weight averaging
or an exponential moving average of a model's parameters), the averaging functions
(``get_swa_avg_fn``, ``get_ema_avg_fn`` and their multi-tensor forms), ``SWALR`` (anneal each
group's learning rate to a constant SWA rate) and ``update_bn`` (recompute BatchNorm statistics
for the averaged weights with one pass over the data).

The arithmetic is PyTorch's, so an averaged model tracks its torch counterpart step for step: the
default average is ``avg + (current - avg) / (n + 1)`` per tensor (PyTorch's CPU path; its CUDA
path uses a multi-tensor lerp instead), the EMA multi-tensor form a ``lerp_`` by ``1 - decay``.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterable

from .. import dtypes as D
from ..autograd.grad_mode import no_grad
from ..creation import tensor
from ..nn.module import Module
from ..nn.modules.normalization import _BatchNorm
from ..tensor import Tensor
from .lr_scheduler.base import LRScheduler, format_param
from .optimizer import Optimizer

__all__ = [
    "AveragedModel",
    "SWALR",
    "update_bn",
    "get_ema_multi_avg_fn",
    "get_swa_multi_avg_fn",
    "get_ema_avg_fn",
    "get_swa_avg_fn",
]


def _is_float(t: Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _check_decay(decay: float) -> None:
    # PyTorch's check, when the function is made (not at the first update)
    if decay < 0.0 or decay > 1.0:
        raise ValueError(
            f"Invalid decay value {decay} provided. Please provide a value in [0,1] range."
        )


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable:
    """A multi-tensor EMA update for AveragedModel(multi_avg_fn=...): every averaged tensor moves
    ``1 - decay`` of the way to the current one (``lerp_``)."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_params: list, current_params: list, num_averaged) -> None:
        if _is_float(ema_params[0]):
            for e, c in zip(ema_params, current_params):
                e.lerp_(c, 1 - decay)
        else:
            for e, c in zip(ema_params, current_params):
                e.copy_(e * decay + c * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable:
    """A multi-tensor running mean for AveragedModel(multi_avg_fn=...): the n-th update moves
    each averaged tensor ``1 / (n + 1)`` of the way to the current one."""

    @no_grad()
    def swa_update(averaged_params: list, current_params: list, num_averaged) -> None:
        if _is_float(averaged_params[0]):
            weight = 1 / (num_averaged + 1)  # a float32 tensor for a tensor count, as PyTorch
            weight = float(weight) if isinstance(weight, Tensor) else weight
            for a, c in zip(averaged_params, current_params):
                a.lerp_(c, weight)
        else:
            for a, c in zip(averaged_params, current_params):
                a.copy_(a + (c - a) / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable:
    """A per-tensor EMA for AveragedModel(avg_fn=...): ``decay * ema + (1 - decay) * current``."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable:
    """A per-tensor running mean for AveragedModel(avg_fn=...):
    ``avg + (current - avg) / (n + 1)``."""

    @no_grad()
    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters (and, with ``use_buffers``, buffers) are averaged over
    the calls of ``update_parameters(model)``; calling it runs the copy.

    avg_fn(averaged, current, n) returns one averaged tensor; multi_avg_fn(averaged_list,
    current_list, n) updates lists in place (grouped by device and dtype); with neither, the
    equal-weight running mean (SWA). The first update copies the model's values. Without
    use_buffers the buffers (BatchNorm statistics) are copied from the model at each update, and
    ``update_bn`` recomputes them for the averaged weights.
    """

    def __init__(
        self,
        model: Module,
        device=None,
        avg_fn: Callable | None = None,
        multi_avg_fn: Callable | None = None,
        use_buffers: bool = False,
    ):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("AveragedModel(): give only one of avg_fn and multi_avg_fn")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=D.int64, device=device or "cpu"))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _tensors(self, model: Module) -> Iterable[Tensor]:
        if self.use_buffers:
            return itertools.chain(model.parameters(), model.buffers())
        return model.parameters()

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current values into the average (the first call copies them)."""
        mine, theirs = [], []
        first = int(self.n_averaged) == 0
        with no_grad():
            for p_avg, p_model in zip(self._tensors(self.module), self._tensors(model)):
                a, m = p_avg.detach(), p_model.detach().to(p_avg.device)
                mine.append(a)
                theirs.append(m)
                if first:
                    a.copy_(m)
            if not first:
                self._average(mine, theirs)
            if not self.use_buffers:
                for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b_model.detach().to(b_avg.device))
            self.n_averaged += 1

    def _average(self, mine: list, theirs: list) -> None:
        if self.multi_avg_fn is not None:
            groups: dict = {}
            for a, m in zip(mine, theirs):
                groups.setdefault((str(a.device), a.dtype), ([], []))
                groups[(str(a.device), a.dtype)][0].append(a)
                groups[(str(a.device), a.dtype)][1].append(m)
            for (device, _), (avgs, currents) in groups.items():
                self.multi_avg_fn(avgs, currents, self.n_averaged.to(device))
            return
        avg_fn = self.avg_fn if self.avg_fn is not None else get_swa_avg_fn()
        for a, m in zip(mine, theirs):
            a.copy_(avg_fn(a, m, self.n_averaged.to(a.device)))


@no_grad()
def update_bn(loader: Iterable, model: Module, device=None) -> None:
    """Recompute the running statistics of ``model``'s BatchNorm layers with one pass over
    ``loader`` (its batches, or their first element): the statistics are reset and accumulated
    as an equal-weight mean (momentum None), then the momenta and the training mode are put
    back. A model without BatchNorm is left alone."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's learning rate from its current value to ``swa_lr`` over
    ``anneal_epochs`` steps (``anneal_strategy`` 'cos' or 'linear'), then hold it there."""

    def __init__(
        self,
        optimizer: Optimizer,
        swa_lr,
        anneal_epochs: int = 10,
        anneal_strategy: str = "cos",
        last_epoch: int = -1,
    ):
        for lr, group in zip(format_param("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        if isinstance(anneal_epochs, bool) or not isinstance(anneal_epochs, int):
            raise ValueError(f"anneal_epochs must be an integer, got {anneal_epochs!r}")
        if anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_strategy = anneal_strategy
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2 if self.anneal_strategy == "cos" else t

    def get_lr(self) -> list:
        self._warn_get_lr()
        # the fraction of the annealing done at this step and at the last one; the rate of the
        # last step is unwound to the rate the annealing started from (group['lr'] is chained)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self._anneal(max(0.0, min(1.0, (step - 1) / span)))
        alpha = self._anneal(max(0.0, min(1.0, step / span)))
        out = []
        for group in self.optimizer.param_groups:
            swa_lr = group["swa_lr"]
            start = (
                swa_lr
                if prev_alpha == 1
                else (group["lr"] - prev_alpha * swa_lr) / (1 - prev_alpha)
            )
            out.append(swa_lr * alpha + start * (1 - alpha))
        return out
