"""Gamma and Dirichlet samples with pathwise gradients.

Sampling: the ``standard_gamma`` op (gpucore/ops/random_counts.py: numpy's gamma sampler
over a Philox stream keyed by gpucore's generator, so ``gpucore.manual_seed`` reproduces it;
drawn on the host and placed on the parameters' device).

Gradient: implicit reparameterisation (Figurnov, Mohamed and Mnih 2018). A sample x = F^-1(u; a)
of the CDF F moves with the shape as dx/da = -(dF/da) / (dF/dx). dF/dx is the density; dF/da is
the derivative of the regularised incomplete gamma function in its shape, taken here by a
central difference of ``igamma`` in float64 (of ``igammac`` in the upper tail, where 1 - F keeps
its relative precision). The gradient is attached as ``x + (a - a.detach()) * dx/da``: the value
is x exactly, the derivative in a is dx/da, and it runs on every backend.
"""

from __future__ import annotations

import gpucore as gc

from ..autograd.grad_mode import is_grad_enabled, no_grad
from ..ops.random_counts import standard_gamma_sample
from ..tensor import Tensor

__all__ = ["standard_gamma", "standard_gamma_grad", "sample_dirichlet"]


def _sample(alpha: Tensor) -> Tensor:
    x = standard_gamma_sample(alpha.detach())
    # a tiny shape can round a sample to 0, outside the support: keep the least positive
    return x.clamp(min=gc.finfo(x.dtype).tiny)


def standard_gamma_grad(alpha: Tensor, x: Tensor) -> Tensor:
    """dx/dalpha of standard gamma samples ``x`` of shape ``alpha`` (the implicit gradient)."""
    with no_grad():
        a, v = alpha.detach().to(gc.float64), x.detach().to(gc.float64)
        h = 1e-5 * a.clamp(min=1e-3)
        upper = v > a
        lo = gc.where(upper, -gc.igammac(a + h, v), gc.igamma(a + h, v))
        hi = gc.where(upper, -gc.igammac(a - h, v), gc.igamma(a - h, v))
        dF_da = (lo - hi) / (2 * h)
        log_pdf = (a - 1) * v.log() - v - a.lgamma()
        grad = -dF_da / log_pdf.exp()
        # where the density underflows the sample sits at the far tail: no finite slope
        grad = gc.where(grad.isfinite(), grad, gc.zeros_like(grad))
        return grad.to(x.dtype)


def standard_gamma(alpha: Tensor) -> Tensor:
    """Gamma(alpha, 1) samples of ``alpha``'s shape, differentiable in ``alpha`` through the
    implicit reparameterisation gradient."""
    x = _sample(alpha)
    if alpha._requires_grad and is_grad_enabled():
        return x + (alpha - alpha.detach()) * standard_gamma_grad(alpha, x)
    return x


def sample_dirichlet(concentration: Tensor) -> Tensor:
    """Dirichlet samples (over the last dimension) as gammas divided by their sum, differentiable
    in ``concentration`` through the gammas' implicit gradients."""
    g = standard_gamma(concentration)
    return (g / g.sum(-1, keepdim=True)).clamp(min=gc.finfo(g.dtype).tiny)
