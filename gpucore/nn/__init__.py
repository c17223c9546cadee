"""Neural-network building blocks with PyTorch's names: Module, Parameter, layers, losses.

``gpucore.nn.functional`` holds the functional forms; ``gpucore.nn.init`` the initialisers.
"""

from . import functional
from .module import Module
from .parameter import Parameter
