"""Weight normalization as torch.nn.utils.weight_norm / remove_weight_norm (the hook-based form
that temporal convolutional networks, WaveNet-style and many older models use).

``weight_norm(module, "weight", dim)`` replaces the parameter ``weight`` by two parameters,
``weight_g`` (its norm over every dim but ``dim``, keeping dims) and ``weight_v`` (its
direction, initially the weight itself), and recomputes ``weight = weight_g * weight_v /
||weight_v||`` as a plain attribute before every forward (a forward pre-hook), so gradients reach
g and v. ``dim=None`` (or -1, as PyTorch) takes the norm of the whole tensor.
"""

from __future__ import annotations

from ...tensor import Tensor
from ..module import Module
from ..parameter import Parameter

__all__ = ["weight_norm", "remove_weight_norm"]


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm of v over every dim but ``dim`` (kept as size-1 dims), or of all of v when
    dim is -1 (PyTorch's meaning of -1 here, not the last dim)."""
    if dim == -1:
        return v.norm()
    return v.norm(2, dim=tuple(d for d in range(v.ndim) if d != dim), keepdim=True)


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from ``<name>_g`` and
    ``<name>_v``."""

    def __init__(self, name: str, dim: int):
        self.name = name
        self.dim = dim

    def compute_weight(self, module: Module) -> Tensor:
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparameterise ``module.<name>`` as magnitude ``<name>_g`` times direction ``<name>_v``
    (normalized over every dim but ``dim``); returns the module, as torch.nn.utils.weight_norm."""
    params = module._parameters
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, WeightNorm) and hook.name == name:
            raise RuntimeError(
                f"Cannot register two weight_norm hooks on the same parameter {name}"
            )
    if name not in params or params[name] is None:
        raise ValueError(f"weight_norm(): {type(module).__name__} has no parameter {name!r}")
    weight = params[name]
    if dim is None:
        dim = -1
    elif -weight.ndim <= dim < -1:  # as PyTorch: -1 is the whole tensor, -2 ... count back
        dim += weight.ndim
    if dim < -1 or dim >= weight.ndim:
        raise IndexError(
            f"weight_norm(): dim {dim} is out of range for {name} of shape {tuple(weight.shape)}"
        )
    fn = WeightNorm(name, dim)
    del params[name]
    module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight, dim).detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    setattr(module, name, fn.compute_weight(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo ``weight_norm``: ``<name>`` becomes a parameter again, holding the current
    ``g * v / ||v||``; returns the module."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            weight = hook.compute_weight(module).detach()
            del module._forward_pre_hooks[key]
            delattr(module, name)
            del module._parameters[name + "_g"]
            del module._parameters[name + "_v"]
            module.register_parameter(name, Parameter(weight))
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
