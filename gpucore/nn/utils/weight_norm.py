"""Weight normalization as a forward pre-hook, as torch.nn.utils.weight_norm (the form GAN and
audio code uses; PyTorch's newer parametrizations.weight_norm is not provided): the weight is
re-expressed as ``g * v / ||v||`` with the norm over every dim but ``dim``, ``g`` and ``v`` become
the parameters (``weight_g``, ``weight_v``), and the weight is recomputed from them before each
forward."""

from __future__ import annotations

from ...errors import ShapeError
from ...tensor import Tensor
from ..parameter import Parameter

__all__ = ["weight_norm", "remove_weight_norm"]


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:
    """The ``pow``-norm of v over every dim but ``dim`` (kept, the others size 1); dim -1: the
    norm of the whole tensor."""
    if dim == -1:
        return v.norm(pow)
    dim = dim % v.ndim
    keep = [d for d in range(v.ndim) if d != dim]
    return v.abs().pow(pow).sum(dim=keep, keepdim=True).pow(1.0 / pow)


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from ``<name>_g`` and
    ``<name>_v``."""

    def __init__(self, name: str, dim: int):
        self.name, self.dim = name, -1 if dim is None else dim

    def compute_weight(self, module) -> Tensor:
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / norm_except_dim(v, 2, self.dim))

    def __call__(self, module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name: str = "weight", dim: int = 0):
    """Apply weight normalization to ``module.<name>`` (see the module docstring); returns the
    module."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, WeightNorm) and hook.name == name:
            raise RuntimeError(
                f"Cannot register two weight_norm hooks on the same parameter {name}"
            )
    weight = module._parameters.get(name)
    if weight is None:
        raise ShapeError(f"weight_norm: module has no parameter {name!r}")
    fn = WeightNorm(name, dim)
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    setattr(module, name, fn.compute_weight(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name: str = "weight"):
    """Fold ``<name>_g`` and ``<name>_v`` back into one parameter ``<name>``."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            weight = hook.compute_weight(module).detach()
            del module._forward_pre_hooks[key]
            del module._parameters[name + "_g"]
            del module._parameters[name + "_v"]
            if name in module.__dict__:
                del module.__dict__[name]
            module.register_parameter(name, Parameter(weight))
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
