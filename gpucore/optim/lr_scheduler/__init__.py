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

Modules: ``base`` (LRScheduler), ``basic`` (functions of the epoch), ``composite``
(SequentialLR, ChainedScheduler), ``cyclic`` (CyclicLR, OneCycleLR,
CosineAnnealingWarmRestarts), ``plateau`` (ReduceLROnPlateau).
"""

from .base import EPOCH_DEPRECATION_WARNING, LRScheduler
from .basic import (
    ConstantLR,
    CosineAnnealingLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    MultiplicativeLR,
    MultiStepLR,
    PolynomialLR,
    StepLR,
)
from .composite import ChainedScheduler, SequentialLR
from .cyclic import CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR
from .plateau import ReduceLROnPlateau

_LRScheduler = LRScheduler  # PyTorch's old name, still subclassed by older scripts

__all__ = [
    "LRScheduler",
    "LambdaLR",
    "MultiplicativeLR",
    "StepLR",
    "MultiStepLR",
    "ConstantLR",
    "LinearLR",
    "ExponentialLR",
    "SequentialLR",
    "PolynomialLR",
    "CosineAnnealingLR",
    "ChainedScheduler",
    "ReduceLROnPlateau",
    "CyclicLR",
    "CosineAnnealingWarmRestarts",
    "OneCycleLR",
    "EPOCH_DEPRECATION_WARNING",
]
