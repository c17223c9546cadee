"""Parametrizations as torch.nn.utils.parametrizations: ``weight_norm`` through
``parametrize.register_parametrization`` (PyTorch's recommended form of weight normalization:
``module.parametrizations.weight.original0`` is the magnitude g, ``original1`` the direction v).
"""

from __future__ import annotations

from ...tensor import Tensor
from ..module import Module
from . import parametrize
from .weight_norm import _norm_except_dim

__all__ = ["weight_norm"]


class _WeightNorm(Module):
    """weight = g * v / ||v|| (norm over every dim but ``dim``; -1: the whole tensor)."""

    def __init__(self, dim: int | None = 0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight: Tensor) -> tuple:
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparameterise ``module.<name>`` as ``original0 * original1 / ||original1||`` (g and v,
    the norm over every dim but ``dim``; None: the whole tensor); returns the module."""
    param = getattr(module, name, None)
    if isinstance(param, Tensor) and dim is not None and -param.ndim <= dim < -1:
        dim += param.ndim  # as PyTorch: -1 is the whole tensor, -2 ... count back
    if isinstance(param, Tensor) and dim is not None and not -1 <= dim < param.ndim:
        raise IndexError(
            f"weight_norm(): dim {dim} is out of range for {name} of shape {tuple(param.shape)}"
        )
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module
