"""Optimizers with PyTorch's names and semantics: SGD, Adam, AdamW, RMSprop; learning-rate
schedulers in ``gpucore.optim.lr_scheduler``.

Each optimizer updates a parameter and its state with one fused kernel (registry ops
``sgd_step``, ``adam_step``, ``rmsprop_step`` in gpucore/ops/optim.py): the C extension on the
CPU, one compute-shader dispatch on the Vulkan device, wherever the parameter lives. The host
float32 / float64 parameters of a param group are updated together, in one multi-tensor C call
per step (``foreach_update``), bitwise as one kernel each.
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer, required
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler", "required"]
