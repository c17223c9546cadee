"""KL divergences between different scalar families, from one identity instead of one formula
per pair:

    KL(p || q) = -H(p) - E_p[log q(X)]   (infinite unless p's support lies inside q's)

``E_p[log q(X)]`` is linear in a few statistics of p: each q family below writes its log
density as a combination of E[X], E[X^2], E[log X], E[log(1 - X)] and E[exp(t X)] (the moment
generating function), and each p family gives those statistics and its support. A pair is
then one line of the registration table at the bottom (the pairs PyTorch registers).
"""

from __future__ import annotations

import math

import gpucore as gc
from gpucore.ops.common import broadcast_shapes

from .continuous import Beta, Exponential, Gamma, Laplace, Normal, Uniform
from .continuous_bernoulli_von_mises import ContinuousBernoulli
from .derived import Gumbel, Pareto
from .kl import register_kl

_EULER = 0.57721566490153286061


def _full(like, v):
    return gc.full_like(like, v)


# ---------------------------------------------------------------- statistics of p
# support bounds (lo, hi), E[log X], E[log(1 - X)], E[exp(t X)]; E[X] and Var[X] come from
# the distribution itself


def _support(p):
    if isinstance(p, (Beta, ContinuousBernoulli)):
        return 0.0, 1.0
    if isinstance(p, (Exponential, Gamma)):
        return 0.0, math.inf
    if isinstance(p, Pareto):
        return p.scale, math.inf
    if isinstance(p, Uniform):
        return p.low, p.high
    return -math.inf, math.inf  # Normal, Laplace, Gumbel


def _mean_log(p):
    if isinstance(p, Beta):
        return p.concentration1.digamma() - (p.concentration1 + p.concentration0).digamma()
    if isinstance(p, Exponential):
        return -_EULER - p.rate.log()
    if isinstance(p, Gamma):
        return p.concentration.digamma() - p.rate.log()
    if isinstance(p, Pareto):
        return p.scale.log() + p.alpha.reciprocal()
    if isinstance(p, Uniform):
        return _uniform_mean_log(p.low, p.high)
    raise NotImplementedError(f"E[log X] of {type(p).__name__}")


def _uniform_mean_log(lo, hi):
    """E[log X] for X ~ Uniform(lo, hi), 0 <= lo: (hi log hi - lo log lo) / (hi - lo) - 1."""
    safe_lo = lo.clamp(min=0)
    return (gc.xlogy(hi, hi) - gc.xlogy(safe_lo, safe_lo)) / (hi - lo) - 1


def _mean_log1m(p):
    if isinstance(p, Beta):
        return p.concentration0.digamma() - (p.concentration1 + p.concentration0).digamma()
    if isinstance(p, Uniform):
        return _uniform_mean_log(1 - p.high, 1 - p.low)
    raise NotImplementedError(f"E[log(1 - X)] of {type(p).__name__}")


def _mgf(p, t):
    """E[exp(t X)] at t < 0."""
    if isinstance(p, Exponential):
        return p.rate / (p.rate - t)
    if isinstance(p, Gamma):
        return (1 - t / p.rate).pow(-p.concentration)
    if isinstance(p, Normal):
        return (p.loc * t + 0.5 * (p.scale * t).pow(2)).exp()
    if isinstance(p, Uniform):
        return ((t * p.high).exp() - (t * p.low).exp()) / (t * (p.high - p.low))
    if isinstance(p, Gumbel):
        return (p.loc * t + (1 - p.scale * t).lgamma()).exp()
    raise NotImplementedError(f"E[exp(tX)] of {type(p).__name__}")


def _second_moment(p):
    return p.variance + p.mean.pow(2)


# ---------------------------------------------------------------- E_p[log q(X)] per q family


def _log_normal_q(p, q):
    m2 = _second_moment(p) - 2 * q.loc * p.mean + q.loc.pow(2)
    return -q.scale.log() - 0.5 * math.log(2 * math.pi) - m2 / (2 * q.scale.pow(2))


def _log_exponential_q(p, q):
    return q.rate.log() - q.rate * p.mean


def _log_gamma_q(p, q):
    a, r = q.concentration, q.rate
    return a * r.log() - a.lgamma() + (a - 1) * _mean_log(p) - r * p.mean


def _log_beta_q(p, q):
    a, b = q.concentration1, q.concentration0
    lbeta = a.lgamma() + b.lgamma() - (a + b).lgamma()
    return (a - 1) * _mean_log(p) + (b - 1) * _mean_log1m(p) - lbeta


def _log_uniform_q(p, q):
    return -(q.high - q.low).log()


def _log_pareto_q(p, q):
    return q.alpha.log() + q.alpha * q.scale.log() - (q.alpha + 1) * _mean_log(p)


def _log_gumbel_q(p, q):
    # log q = -log b - z - exp(-z), z = (x - mu) / b
    z_mean = (p.mean - q.loc) / q.scale
    e_exp = (q.loc / q.scale).exp() * _mgf(p, -q.scale.reciprocal())
    return -q.scale.log() - z_mean - e_exp


def _log_cb_q(p, q):
    eta = q._eta()
    return p.mean * eta - q._log_normalizer(eta)


def _log_laplace_q(p, q):
    # for p Normal: E|X - mu| = s sqrt(2/pi) exp(-d^2 / 2s^2) + d (1 - 2 Phi(-d / s))
    d, s = p.loc - q.loc, p.scale
    folded = s * math.sqrt(2 / math.pi) * (-(d.pow(2)) / (2 * s.pow(2))).exp() + d * gc.erf(
        d / (s * math.sqrt(2))
    )
    return -(2 * q.scale).log() - folded / q.scale


_LOG_Q = {
    Normal: _log_normal_q,
    Exponential: _log_exponential_q,
    Gamma: _log_gamma_q,
    Beta: _log_beta_q,
    Uniform: _log_uniform_q,
    Pareto: _log_pareto_q,
    Gumbel: _log_gumbel_q,
    ContinuousBernoulli: _log_cb_q,
    Laplace: _log_laplace_q,
}


def _cross_kl(p, q):
    """-H(p) - E_p[log q(X)], infinite where p's support leaves q's."""
    (plo, phi), (qlo, qhi) = _support(p), _support(q)
    inside = _ge(plo, qlo) & _ge(qhi, phi)
    like = p._like()
    if not bool(inside.any()):
        shape = broadcast_shapes("kl_divergence", tuple(p.batch_shape), tuple(q.batch_shape))
        return gc.full(shape, math.inf, dtype=like.dtype, device=like.device)
    kl = -p.entropy() - _LOG_Q[_family(q)](p, q)
    return gc.where(inside.to(device=kl.device), kl, _full(kl, math.inf))


def _family(q):
    return next(c for c in _LOG_Q if isinstance(q, c))


def _ge(a, b):
    """a >= b elementwise for numbers or tensors (as a bool tensor)."""
    a = a if isinstance(a, gc.Tensor) else gc.tensor(a, dtype=gc.float64)
    b = b if isinstance(b, gc.Tensor) else gc.tensor(b, dtype=gc.float64)
    return a.to(gc.float64) >= b.to(gc.float64)


# the pairs of different families PyTorch registers (same-family pairs are in kl.py, except
# Gumbel-Gumbel and Pareto-Pareto, which this identity gives as well)
_PAIRS = {
    Beta: (ContinuousBernoulli, Exponential, Gamma, Normal, Pareto, Uniform),
    ContinuousBernoulli: (Exponential, Normal, Pareto, Uniform),
    Exponential: (Beta, ContinuousBernoulli, Gamma, Gumbel, Normal, Pareto, Uniform),
    Gamma: (Beta, ContinuousBernoulli, Exponential, Gumbel, Normal, Pareto, Uniform),
    Gumbel: (Beta, ContinuousBernoulli, Exponential, Gamma, Gumbel, Normal, Pareto, Uniform),
    Laplace: (Beta, ContinuousBernoulli, Exponential, Gamma, Normal, Pareto, Uniform),
    Normal: (Beta, ContinuousBernoulli, Exponential, Gamma, Gumbel, Laplace, Pareto, Uniform),
    Pareto: (Beta, ContinuousBernoulli, Exponential, Gamma, Normal, Pareto, Uniform),
    Uniform: (Beta, ContinuousBernoulli, Exponential, Gamma, Gumbel, Normal, Pareto),
}
for _p, _qs in _PAIRS.items():
    for _q in _qs:
        register_kl(_p, _q)(_cross_kl)
