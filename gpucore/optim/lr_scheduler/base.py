"""The scheduler base class, ``LRScheduler``, with PyTorch's protocol (see the package's
docstring)."""

from __future__ import annotations

import types
import warnings

from ... import _caller_warnings as caller_warnings
from ..optimizer import Optimizer

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
        """Restore the attributes saved by ``state_dict()``."""
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list:
        """The learning rates the last ``step()`` set, one per parameter group."""
        return self._last_lr

    def get_lr(self) -> list:
        """The learning rates at ``last_epoch`` (called by ``step``; use ``get_last_lr()``)."""
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
            caller_warnings.warn(
                "Detected call of `lr_scheduler.step()` before `optimizer.step()`. You should "
                "call them in the opposite order: `optimizer.step()` before "
                "`lr_scheduler.step()`; otherwise the first value of the learning rate schedule "
                "is skipped.",
                UserWarning,
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


def format_param(name: str, optimizer: Optimizer, value) -> list:
    """One value per parameter group: a list or tuple of that length, or one value for all."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. {name} has "
                f"{len(value)} values, param_groups has {len(optimizer.param_groups)}."
            )
        return list(value)
    return [value] * len(optimizer.param_groups)


def lambdas_state(fns: list) -> list:
    """The saveable part of lr functions: the attributes of callable objects, None for plain
    functions and lambdas (PyTorch's rule)."""
    return [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy() for fn in fns]
