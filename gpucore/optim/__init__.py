"""Optimizers with PyTorch's names and semantics: SGD, Adam, AdamW, RMSprop, Adadelta, Adagrad,
Adamax, NAdam, RAdam and LBFGS; learning-rate schedulers in ``gpucore.optim.lr_scheduler``;
weight averaging (SWA, EMA: AveragedModel, SWALR, update_bn) in ``gpucore.optim.swa_utils``.

SGD, Adam/AdamW and RMSprop update a parameter and its state with one fused kernel (registry ops
``sgd_step``, ``adam_step``, ``rmsprop_step`` in gpucore/ops/optim.py): the C extension on the
CPU, one compute-shader dispatch on the Vulkan device, wherever the parameter lives. The host
float32 / float64 parameters of a param group are updated together, in one multi-tensor C call
per step (``foreach_update``), bitwise as one kernel each.

Adadelta, Adagrad, Adamax, NAdam and RAdam are written in gpucore tensor ops, in place, one
parameter at a time (each op vectorized over the parameter), on whichever device it lives.
LBFGS works on the parameters as one flat vector, with a closure and an optional strong-Wolfe
line search. Every optimizer accepts PyTorch's ``foreach`` / ``fused`` / ``capturable`` /
``differentiable`` flags where PyTorch's does (see ``_options``), and ``maximize``.
"""

from . import lr_scheduler, swa_utils
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer, required
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = [
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "RMSprop",
    "Adadelta",
    "Adagrad",
    "Adamax",
    "NAdam",
    "RAdam",
    "LBFGS",
    "lr_scheduler",
    "swa_utils",
    "required",
]
