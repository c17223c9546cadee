"""Neural-network building blocks with PyTorch's names: Module, Parameter, layers, losses.

``gpucore.nn.functional`` holds the functional forms, ``gpucore.nn.init`` the initialisers,
``gpucore.nn.grad`` the convolution gradients as functions and ``gpucore.nn.utils`` gradient
clipping.
"""

from . import functional, grad, init, utils
from .module import Module
from .modules import *  # noqa: F403
from .modules import __all__ as _modules_all
from .parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter

functional.grad = grad  # torch.nn.functional.grad is torch.nn.grad too

__all__ = [
    "Buffer",
    "Module",
    "Parameter",
    "UninitializedBuffer",
    "UninitializedParameter",
    "functional",
    "grad",
    "init",
    "utils",
    *_modules_all,
]


def __getattr__(name: str):
    # gpucore.nn.parallel (DistributedDataParallel) imports gpucore.distributed: loaded on first
    # use, so training in one process never reads MPI launchers' variables.
    if name == "parallel":
        import importlib  # noqa: PLC0415

        return importlib.import_module(".parallel", __name__)
    raise AttributeError(f"module 'gpucore.nn' has no attribute {name!r}")
