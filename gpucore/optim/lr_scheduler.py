"""Learning-rate schedulers with PyTorch's semantics (torch.optim.lr_scheduler, 2.x).

A scheduler owns an optimizer and, at each ``step()`` (call it after ``optimizer.step()``),
advances ``last_epoch`` and writes new learning rates into ``group['lr']`` of every parameter
group. Construction performs the initial step (epoch 0) and records ``group['initial_lr']``.

Like PyTorch's, the schedules are chainable: each ``get_lr`` is a recurrence on the current
``group['lr']``, so two schedulers stepping one optimizer compose (their factors multiply), and a
user's change to ``group['lr']`` carries forward. The closed forms (``_get_closed_form_lr``,
used by the deprecated ``step(epoch)`` and by SequentialLR at its milestones) give the same values
on an unchained schedule. ``state_dict()`` holds every attribute but the optimizer (plain values
only: it can be saved with ``gpucore.save``).
"""

from __future__ import annotations

import math
import types
import warnings
from bisect import bisect_right
from collections import Counter

from .optimizer import Optimizer

__all__ = [
    "LRScheduler",
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "LinearLR",
    "LambdaLR",
    "SequentialLR",
]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
    "possible. Please use `scheduler.step()` to step the scheduler. During the deprecation, if "
    "epoch is different from None, the closed form is used instead of the new chainable form, "
    "where available."
)


class LRScheduler:
    """Base class: subclasses implement ``get_lr()`` (the learning rates at ``last_epoch``)."""

    _get_lr_called_within_step = False
    _is_initial = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                        "a scheduler with last_epoch >= 0; load the optimizer's state dict first, "
                        "or construct the scheduler with last_epoch=-1"
                    )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        """Reset the step count and perform the initial step."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self) -> dict:
        """Every attribute but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list:
        """The learning rates the last ``step()`` set, one per parameter group."""
        return self._last_lr

    def get_lr(self) -> list:
        raise NotImplementedError

    def _warn_get_lr(self) -> None:
        if not self._get_lr_called_within_step:
            warnings.warn(
                "To get the last learning rate computed by the scheduler, please use "
                "`get_last_lr()`.",
                UserWarning,
                stacklevel=3,
            )

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or, deprecated, jump to ``epoch`` with the closed form)."""
        if self._step_count == 1 and getattr(self.optimizer, "_opt_called", False) is False:
            warnings.warn(
                "Detected call of `lr_scheduler.step()` before `optimizer.step()`. You should "
                "call them in the opposite order: `optimizer.step()` before "
                "`lr_scheduler.step()`; otherwise the first value of the learning rate schedule "
                "is skipped.",
                UserWarning,
                stacklevel=2,
            )
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        groups = self.optimizer.param_groups
        if len(values) != len(groups):
            raise ValueError(
                f"{type(self).__name__}: {len(values)} learning rates for {len(groups)} "
                "parameter groups"
            )
        for group, lr in zip(groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in groups]

    def _lrs(self) -> list:
        return [group["lr"] for group in self.optimizer.param_groups]


class StepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs:
    ``lr = base_lr * gamma ** (epoch // step_size)``."""

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_get_lr()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list:
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` at each milestone epoch (a milestone listed n
    times multiplies by gamma**n): ``lr = base_lr * gamma ** (milestones passed)``."""

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_get_lr()
        if self.last_epoch not in self.milestones:
            return self._lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._lrs()]

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self.milestones = Counter(self.milestones)  # a loaded state dict holds a plain dict

    def _get_closed_form_lr(self) -> list:
        milestones = sorted(self.milestones.elements())
        return [b * self.gamma ** bisect_right(milestones, self.last_epoch) for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every epoch: ``lr = base_lr * gamma ** epoch``."""

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_get_lr()
        if self._is_initial:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list:
        return [b * self.gamma**self.last_epoch for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the base learning rate to ``eta_min`` over ``T_max`` epochs:
    ``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2`` (and on past
    T_max along the same cosine, as PyTorch's recurrence does)."""

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_get_lr()
        T, eta = self.T_max, self.eta_min
        e = self.last_epoch
        if self._is_initial:
            return self._lrs()
        if self._step_count == 1 and e > 0:
            return [eta + (b - eta) * (1 + math.cos(e * math.pi / T)) / 2 for b in self.base_lrs]
        if (e - 1 - T) % (2 * T) == 0:
            return [
                lr + (b - eta) * (1 - math.cos(math.pi / T)) / 2
                for b, lr in zip(self.base_lrs, self._lrs())
            ]
        return [
            (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) * (lr - eta)
            + eta
            for lr in self._lrs()
        ]

    def _get_closed_form_lr(self) -> list:
        T, eta = self.T_max, self.eta_min
        return [
            eta + (b - eta) * (1 + math.cos(math.pi * self.last_epoch / T)) / 2
            for b in self.base_lrs
        ]


class LinearLR(LRScheduler):
    """Scale the learning rate linearly from ``start_factor`` to ``end_factor`` times the base
    over ``total_iters`` epochs, then keep it (a warm-up with the defaults):
    ``lr = base_lr * (start + (end - start) * min(epoch, total_iters) / total_iters)``."""

    def __init__(
        self,
        optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(
                "Starting multiplicative factor expected to be greater than 0 and less or equal "
                f"to 1, got {start_factor}"
            )
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError(
                f"Ending multiplicative factor expected to be between 0 and 1, got {end_factor}"
            )
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_get_lr()
        s, f, n = self.start_factor, self.end_factor, self.total_iters
        if self.last_epoch == 0:
            return [lr * s for lr in self._lrs()]
        if self._is_initial or self.last_epoch > n:
            return self._lrs()
        return [
            lr * (1.0 + (f - s) / (n * s + (self.last_epoch - 1) * (f - s))) for lr in self._lrs()
        ]

    def _get_closed_form_lr(self) -> list:
        s, f, n = self.start_factor, self.end_factor, self.total_iters
        return [b * (s + (f - s) * min(n, self.last_epoch) / n) for b in self.base_lrs]


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(epoch)``; one function, or one per parameter group.

    ``state_dict()`` keeps the attributes of callable objects, not plain functions or lambdas
    (those cannot be saved)."""

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        self.optimizer = optimizer
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        else:
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(
                    f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}"
                )
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict:
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [
            None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
            for fn in self.lr_lambdas
        ]
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        lr_lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, saved in zip(self.lr_lambdas, lr_lambdas):
            if saved is not None:
                fn.__dict__.update(saved)

    def get_lr(self) -> list:
        self._warn_get_lr()
        return [b * fn(self.last_epoch) for fn, b in zip(self.lr_lambdas, self.base_lrs)]


class SequentialLR(LRScheduler):
    """Run ``schedulers`` one after another, switching at each of ``milestones`` (epochs); at a
    milestone the next scheduler starts from its epoch 0 (its closed form at 0 when it has one).
    E.g. a LinearLR warm-up for 5 epochs, then CosineAnnealingLR: milestones=[5]."""

    def __init__(self, optimizer, schedulers: list, milestones: list, last_epoch: int = -1):
        if len(schedulers) < 1:
            raise ValueError(
                f"{type(self).__name__} expects at least one scheduler, but got no scheduler."
            )
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(
                    f"{type(self).__name__} at index {i} should have `optimizer` as its attribute."
                )
            if s.optimizer is not optimizer:
                raise ValueError(
                    f"{type(self).__name__} expects all schedulers to belong to the same "
                    f"optimizer, but got scheduler {type(s).__name__} at index {i} with a "
                    "different optimizer"
                )
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more than "
                f"the number of milestone points, but got number of schedulers {len(schedulers)} "
                f"and the number of milestones to be equal to {len(milestones)}"
            )
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        self._recursive_undo()
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = self._schedulers[idx].get_last_lr()

    def _recursive_undo(self, sched=None) -> None:
        """Undo the initial step each scheduler made at construction."""
        s = self if sched is None else sched
        if hasattr(s, "_schedulers"):
            for inner in s._schedulers:
                self._recursive_undo(inner)
        elif hasattr(s, "last_epoch"):
            s.last_epoch -= 1

    def step(self) -> None:
        """Advance one epoch (SequentialLR takes no epoch argument, as in PyTorch)."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict:
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        scheds = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for s, sd in zip(self._schedulers, scheds):
            s.load_state_dict(sd)
