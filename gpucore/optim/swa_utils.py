"""Weight averaging with PyTorch's names and semantics (torch.optim.swa_utils): ``AveragedModel``
(stochastic weight averaging, or an exponential moving average with ``get_ema_multi_avg_fn``),
``SWALR`` (anneals each group's learning rate to a constant ``swa_lr``) and ``update_bn``
(recomputes BatchNorm running statistics of the averaged weights with one pass over a loader).

The averages are updated in place with gpucore tensor ops: a float parameter moves toward the
model's by ``lerp`` (weight ``1 / (n + 1)`` for SWA, ``1 - decay`` for EMA, PyTorch's two-sided
lerp), an integer one (a buffer averaged with ``use_buffers``) to the average rounded toward
zero, as PyTorch's foreach kernels do.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterable

from ..autograd.grad_mode import no_grad
from ..creation import tensor as _tensor
from ..dtypes import int64
from ..nn.module import Module
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
    return t.dtype.is_floating_point


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable:
    """An in-place exponential moving average over lists of tensors:
    ``ema = decay * ema + (1 - decay) * current`` (for ``AveragedModel(multi_avg_fn=...)``)."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(
            f"Invalid decay value {decay} provided. Please provide a value in [0,1] range."
        )

    def ema_update(ema_param_list: list, current_param_list: list, _num_averaged) -> None:
        for p_ema, p_model in zip(ema_param_list, current_param_list):
            if _is_float(p_ema):
                p_ema.lerp_(p_model, 1.0 - decay)
            else:
                p_ema.copy_(p_ema * decay + p_model * (1.0 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable:
    """An in-place running (equal-weight) average over lists of tensors:
    ``avg += (current - avg) / (n + 1)`` where ``n`` is the number of models averaged so far."""

    def swa_update(averaged_param_list: list, current_param_list: list, num_averaged) -> None:
        n = int(num_averaged.item()) if isinstance(num_averaged, Tensor) else num_averaged
        for p_avg, p_model in zip(averaged_param_list, current_param_list):
            if _is_float(p_avg):
                p_avg.lerp_(p_model, 1.0 / (n + 1))
            else:
                # rounded toward zero after the float average, as PyTorch's foreach addcdiv
                p_avg.copy_((p_avg + (p_model - p_avg) / (n + 1)).trunc().to(p_avg.dtype))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable:
    """The exponential moving average of one tensor, out of place (``avg_fn=``)."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(
            f"Invalid decay value {decay} provided. Please provide a value in [0,1] range."
        )

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable:
    """The running average of one tensor, out of place (``avg_fn=``)."""

    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A deep copy of ``model`` whose parameters (and, with ``use_buffers``, buffers) hold an
    average of the ``model`` states passed to ``update_parameters``: by default the equal-weight
    running average of SWA; ``avg_fn`` (one tensor, out of place) or ``multi_avg_fn`` (lists,
    in place) choose another, e.g. ``get_ema_multi_avg_fn(0.999)``. The first update copies the
    model. ``forward`` calls the copy. Without ``use_buffers`` the buffers (BatchNorm statistics)
    are copied from the model at each update; recompute them with ``update_bn``."""

    n_averaged: Tensor

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
            raise ValueError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", _tensor(0, dtype=int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _averaged(self, module: Module) -> list:
        if self.use_buffers:
            return list(itertools.chain(module.parameters(), module.buffers()))
        return list(module.parameters())

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current parameters into the average (copy them on the first call)."""
        mine = [p.detach() for p in self._averaged(self.module)]
        theirs = [p.detach() for p in self._averaged(model)]
        if len(mine) != len(theirs):
            raise ValueError(
                f"AveragedModel.update_parameters: the model has {len(theirs)} tensors to "
                f"average, the averaged copy {len(mine)}"
            )
        theirs = [q.to(p.device) for p, q in zip(mine, theirs)]
        with no_grad():
            if int(self.n_averaged.item()) == 0:
                for p, q in zip(mine, theirs):
                    p.copy_(q)
            elif self.avg_fn is not None:
                for p, q in zip(mine, theirs):
                    p.copy_(self.avg_fn(p, q, self.n_averaged.to(p.device)))
            else:
                fn = self.multi_avg_fn if self.multi_avg_fn is not None else get_swa_multi_avg_fn()
                # grouped by device and dtype, as PyTorch's foreach path groups them
                groups: dict = {}
                for p, q in zip(mine, theirs):
                    mine_g, theirs_g = groups.setdefault((str(p.device), p.dtype), ([], []))
                    mine_g.append(p)
                    theirs_g.append(q)
                for (device, _), (mine_g, theirs_g) in groups.items():
                    fn(mine_g, theirs_g, self.n_averaged.to(device))
            if not self.use_buffers:
                for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b_model.detach().to(b_avg.device))
            self.n_averaged += 1


def update_bn(loader: Iterable, model: Module, device=None) -> None:
    """Recompute the running statistics of every BatchNorm in ``model`` with one pass over
    ``loader`` in training mode (a cumulative average: momentum None during the pass). A batch
    that is a list or tuple contributes its first element. No-op without BatchNorm layers."""
    from ..nn.modules.normalization import _BatchNorm

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
    with no_grad():
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
    """Anneals each group's learning rate from its current value to ``swa_lr`` over
    ``anneal_epochs`` steps (cosine or linear), then holds it: the schedule of the SWA phase.
    Chainable like PyTorch's: each step recovers the lr the anneal started from out of the
    current one, so a user's change to ``group['lr']`` carries forward."""

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
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        if (
            isinstance(anneal_epochs, bool)
            or not isinstance(anneal_epochs, int)
            or anneal_epochs < 0
        ):
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self._anneal_strategy = anneal_strategy
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t: float) -> float:
        if self._anneal_strategy == "cos":
            return (1 - math.cos(math.pi * t)) / 2
        return t

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        """The lr the anneal started from, given the lr ``alpha`` of the way to ``swa_lr``."""
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list:
        self._warn_get_lr()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self._anneal(max(0, min(1, (step - 1) / span)))
        alpha = self._anneal(max(0, min(1, step / span)))
        groups = self.optimizer.param_groups
        starts = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, starts)]
