"""Gamma and Dirichlet samples with pathwise gradients, composed of gpucore ops (so they run
where the parameters live and follow ``gpucore.manual_seed``).

Sampling: Marsaglia and Tsang's squeeze-rejection method (ACM TOMS 2000). For shape a >= 1 let
d = a - 1/3, c = 1/sqrt(9d); draw z ~ N(0, 1), u ~ U(0, 1), v = (1 + c z)^3 and accept d v when
v > 0 and log u < z^2 / 2 + d - d v + d log v. Shapes below 1 use the boost
Gamma(a) = Gamma(a + 1) * u^(1/a). Every element keeps its first accepted proposal, so
every sample is an exact draw.

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
from ..tensor import Tensor

__all__ = ["standard_gamma", "standard_gamma_grad", "sample_dirichlet"]


def _propose(d: Tensor, c: Tensor, shape: tuple):
    """One Marsaglia-Tsang proposal per element of ``shape``: (accepted, value)."""
    z = gc.randn(shape, dtype=d.dtype, device=d.device)
    u = gc.rand(shape, dtype=d.dtype, device=d.device)
    v = (1 + c * z) ** 3
    safe_v = gc.where(v > 0, v, gc.ones_like(v))
    ok = (v > 0) & (u.log() < 0.5 * z * z + d - d * safe_v + d * safe_v.log())
    return ok, d * v


_FIRST_ROUND = 3  # proposals per element drawn at once: all three fail for ~1e-4 of them


def _marsaglia_tsang(a: Tensor) -> Tensor:
    """Gamma(a) draws for a flat tensor of shapes a >= 1: each element's first accepted
    proposal. The first round proposes three times per element in one batch of ops (at least
    95% of single proposals are accepted); the few elements left draw again until accepted."""
    d = a - 1.0 / 3.0
    c = (9.0 * d).rsqrt()
    ok, value = _propose(d, c, (_FIRST_ROUND, a.shape[0]))
    first = ok.to(gc.int64).argmax(0, keepdim=True)
    out = value.gather(0, first).reshape(-1)
    waiting = gc.arange(a.shape[0], device=a.device)[~ok.any(0)]
    while waiting.shape[0]:
        ok, value = _propose(d[waiting], c[waiting], tuple(waiting.shape))
        out[waiting[ok]] = value[ok]
        waiting = waiting[~ok]
    return out


def _sample(alpha: Tensor) -> Tensor:
    with no_grad():
        a = alpha.detach().reshape(-1)
        if a.numel() == 0:
            return gc.zeros_like(alpha.detach())
        small = a < 1
        x = _marsaglia_tsang(gc.where(small, a + 1, a))
        if bool(small.any()):
            u = gc.rand(tuple(a.shape), dtype=a.dtype, device=a.device)
            x = gc.where(small, x * u.pow(1 / a), x)
        # a tiny shape can round a sample to 0, outside the support: keep the least positive
        return x.clamp(min=gc.finfo(a.dtype).tiny).reshape(alpha.shape)


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
    if alpha.requires_grad and is_grad_enabled():
        return x + (alpha - alpha.detach()) * standard_gamma_grad(alpha, x)
    return x


def sample_dirichlet(concentration: Tensor) -> Tensor:
    """Dirichlet samples (over the last dimension) as gammas divided by their sum, differentiable
    in ``concentration`` through the gammas' implicit gradients."""
    g = standard_gamma(concentration)
    return (g / g.sum(-1, keepdim=True)).clamp(min=gc.finfo(g.dtype).tiny)
