"""gaussian_nll_loss: the negative log-likelihood of a target under a Gaussian whose mean and
variance a network predicts, as torch.nn.functional.gaussian_nll_loss."""

from __future__ import annotations

import math

from ...autograd.grad_mode import no_grad
from ...ops.common import host_quiet
from ...tensor import Tensor
from ._utils import _check_reduction, _check_tensor, _reduce


def gaussian_nll_loss(
    input: Tensor,
    target: Tensor,
    var,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """0.5 * (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) with
    ``full``), reduced. ``var`` has input's shape (heteroscedastic), or input's shape without its
    last dim, or input's shape with one dim of size 1 (homoscedastic over that dim, as PyTorch
    2.13), or is a number; negative entries raise ValueError. The
    clamp at eps passes gradients through unchanged, as PyTorch's (done under no_grad)."""
    _check_reduction("gaussian_nll_loss", reduction)
    _check_tensor("gaussian_nll_loss", input)
    _check_tensor("gaussian_nll_loss", target, "target")
    number = not isinstance(var, Tensor)
    if number:
        var = input.new_full((), float(var))
    if not number and tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (
            var.ndim == input.ndim and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1
        ):
            raise ValueError(
                f"gaussian_nll_loss(): var of shape {tuple(var.shape)} does not fit input of shape "
                f"{tuple(input.shape)}; give var input's shape, input's shape without its last "
                "dim, or input's shape with one dim of size 1"
            )
    # a check only (the graph does not depend on it): not a host read a capture refuses
    with no_grad():
        negative = bool(host_quiet((var < 0).any()))
    if negative:
        raise ValueError("gaussian_nll_loss(): var has negative entry/entries")
    with no_grad():
        shift = var.clamp(min=eps) - var
    v = var + shift  # the clamped value, the gradient of var itself
    loss = 0.5 * (v.log() + (input - target) ** 2 / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)
