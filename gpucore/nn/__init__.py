"""Neural-network building blocks with PyTorch's names: Module, Parameter, layers, losses.

``gpucore.nn.functional`` holds the functional forms, ``gpucore.nn.init`` the initialisers,
``gpucore.nn.grad`` the convolution gradients as functions and ``gpucore.nn.utils`` gradient
clipping.
"""

import importlib as _importlib

# functional comes with ``import gpucore`` (it declares gpucore.conv2d, Tensor.prelu, ...); the
# layers (gpucore.nn.modules: Linear, Conv2d, ...) load on first access, from here
# (``nn.Linear``, ``from gpucore.nn import Linear``) or by importing them: ``import gpucore``
# need not pay for ~90 classes.
from . import functional, grad, init, utils
from .module import Module
from .parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter

functional.grad = grad  # torch.nn.functional.grad is torch.nn.grad too

_OWN = [
    "Buffer",
    "Module",
    "Parameter",
    "UninitializedBuffer",
    "UninitializedParameter",
    "functional",
    "grad",
    "init",
    "utils",
]


def _layers():
    return _importlib.import_module(".modules", __name__)


def __dir__():
    return sorted(set(globals()) | {"__all__", "modules", *_layers().__all__})


def __getattr__(name: str):
    # gpucore.nn.parallel (DistributedDataParallel) imports gpucore.distributed: loaded on first
    # use, so training in one process never reads MPI launchers' variables.
    if name == "parallel":
        return _importlib.import_module(".parallel", __name__)
    if name == "__all__":  # star imports read it: the layers' names too
        value = globals()["__all__"] = [*_OWN, *_layers().__all__]
        return value
    if name == "modules" or not name.startswith("__"):
        layers = _layers()
        if name == "modules":
            return layers
        if name in layers.__all__:
            value = globals()[name] = getattr(layers, name)
            return value
    raise AttributeError(f"module 'gpucore.nn' has no attribute {name!r}")
