"""Schedulers made of schedulers: SequentialLR (one after another) and ChainedScheduler (all
at once, their factors multiplied)."""

from __future__ import annotations

from bisect import bisect_right

from .base import LRScheduler
from .plateau import ReduceLROnPlateau


class _OfSchedulers(LRScheduler):
    """The state of a scheduler made of ``self._schedulers``: its own attributes (not the
    optimizer) and each inner scheduler's state dict."""

    def state_dict(self) -> dict:
        """This scheduler's attributes and each inner scheduler's state dict."""
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a state dict made by ``state_dict()``."""
        state_dict = dict(state_dict)
        scheds = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for s, sd in zip(self._schedulers, scheds):
            s.load_state_dict(sd)


class SequentialLR(_OfSchedulers):
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


class ChainedScheduler(_OfSchedulers):
    """Step several schedulers of one optimizer together, each ``step()`` stepping every one in
    order, so that their (chainable) factors multiply. ``optimizer`` defaults to the first
    scheduler's. ReduceLROnPlateau cannot be chained (its step needs a metric)."""

    def __init__(self, schedulers: list, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError(
                f"{type(self).__name__} expects at least one scheduler to be chained, but got no "
                "scheduler."
            )
        optimizer = optimizer or schedulers[0].optimizer
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(
                    f"{type(self).__name__} at index {i} should have `optimizer` as its attribute."
                )
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(
                    f"{type(self).__name__} does not support `ReduceLROnPlateau` scheduler as it "
                    "requires additional kwargs to be specified when calling `step`, but got one "
                    f"at index {i} in the given schedulers sequence."
                )
            if s.optimizer is not optimizer:
                raise ValueError(
                    f"{type(self).__name__} expects all schedulers to belong to the same "
                    f"optimizer, but got scheduler {type(s).__name__} at index {i} with a "
                    "different optimizer"
                )
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = [g["lr"] for g in self._schedulers[-1].optimizer.param_groups]

    def step(self) -> None:
        """Step every scheduler, in order."""
        for s in self._schedulers:
            s.step()
        self._last_lr = [g["lr"] for g in self._schedulers[-1].optimizer.param_groups]
