"""Two families with special numerics: ContinuousBernoulli (written in its natural parameter,
with series near probs = 1/2) and VonMises (the circular normal, sampled by Best and Fisher's
rejection)."""

from __future__ import annotations

import math

import gpucore as gc

from ..autograd.grad_mode import no_grad
from . import constraints as C
from .discrete import _binary
from .distribution import Arg, Declared, Param
from .exp_family import ExponentialFamily

__all__ = ["ContinuousBernoulli", "VonMises"]


def _small(eta, cut):
    """(|eta| < cut, eta moved off that region) so the closed forms stay finite (and their
    gradients NaN-free) where the series is used instead."""
    near = eta.abs() < cut
    return near, gc.where(near, gc.full_like(eta, cut), eta)


class ContinuousBernoulli(ExponentialFamily):
    """ContinuousBernoulli(probs=None, logits=None, lims=(0.499, 0.501)): density
    C(p) p^x (1 - p)^(1 - x) on [0, 1].

    Written in the natural parameter eta = logit(p): the density is exp(eta x - A(eta)) with
    A(eta) = log((e^eta - 1) / eta), so the mean is A', the variance A'', the entropy
    A - eta A', and the cdf (e^(eta x) - 1) / (e^eta - 1). Each is evaluated with expm1/log1p
    and, for |eta| near 0 where the closed forms divide 0 by 0, by its Taylor series in eta.
    probs are clamped to [eps, 1 - eps] of their dtype (as PyTorch), so probs 0 or 1 give the
    finite limit of a very skewed density. ``lims`` is accepted for PyTorch's signature; the
    evaluation above is accurate for every probs, so it chooses nothing."""

    fields = (_binary(), Arg("lims", (0.499, 0.501)))
    support = C.unit_interval
    has_rsample = True
    _mean_carrier_measure = 0

    def _eta(self):
        """logit(probs) with probs clamped to [eps, 1 - eps]."""
        eps = gc.finfo(self.logits.dtype).eps
        bound = math.log1p(-eps) - math.log(eps)
        return self.logits.clamp(min=-bound, max=bound)

    def _log_normalizer(self, eta):
        # log(expm1(eta) / eta) = max(eta, 0) + log(1 - e^-|eta|) - log|eta|
        near, e = _small(eta, 1e-3)
        a = e.abs()
        closed = e.clamp(min=0) + (-(-a).expm1()).log() - a.log()
        series = eta / 2 + eta.pow(2) / 24 - eta.pow(4) / 2880
        return gc.where(near, series, closed)

    @property
    def mean(self):
        # A'(eta) = 1 / (1 - e^-eta) - 1 / eta
        eta = self._eta()
        near, e = _small(eta, 1e-3)
        closed = 1 / (-(-e).expm1()) - 1 / e
        return gc.where(near, 0.5 + eta / 12 - eta.pow(3) / 720, closed)

    @property
    def variance(self):
        # A''(eta) = 1 / eta^2 - 1 / (4 sinh(eta / 2)^2)
        eta = self._eta()
        near, e = _small(eta, 0.05)
        closed = 1 / e.pow(2) - 1 / (2 * (e / 2).sinh()).pow(2)
        y2 = eta.pow(2)
        series = 1 / 12 - y2 * (1 / 240 - y2 * (1 / 6048 - y2 / 172800))
        return gc.where(near, series, closed)

    def _rsample(self, shape):
        return self._icdf(self._draw("uniform", shape))

    def _log_prob(self, x):
        eta = self._eta()
        return x * eta - self._log_normalizer(eta)

    def _cdf(self, x):
        # expm1(eta x) / expm1(eta); eta is bounded by the clamp, so neither overflows
        eta = self._eta()
        near, e = _small(eta, 1e-5)
        xi = x.clamp(min=0, max=1)
        closed = (e * xi).expm1() / e.expm1()
        w = xi * (xi - 1)
        series = xi + eta * w / 2 + eta.pow(2) * w * (2 * xi - 1) / 12
        return gc.where(near, series, closed)

    def _icdf(self, u):
        # the cdf solved for x: log1p(u expm1(eta)) / eta
        eta = self._eta()
        near, e = _small(eta, 1e-5)
        closed = (u * e.expm1()).log1p() / e
        w = u * (1 - u)
        series = u + eta * w / 2 + eta.pow(2) * w * (1 - 2 * u) / 6
        return gc.where(near, series, closed)

    def entropy(self):
        eta = self._eta()
        return self._log_normalizer(eta) - eta * self.mean

    def _natural_params(self):
        return (self._eta(),)


_UNIFORM_BELOW = 1e-12  # VonMises: below this concentration a sample is uniform on the circle
_MAX_ROUNDS = 200  # VonMises: rejection rounds before giving up (each leaves <= 34%)


class VonMises(Declared):
    """VonMises(loc, concentration): the circular normal on [-pi, pi), density
    exp(k cos(x - loc)) / (2 pi I0(k))."""

    fields = (Param("loc", C.real), Param("concentration", C.positive))
    support = C.real
    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        k = self.concentration
        return 1 - gc.special.i1e(k) / gc.special.i0e(k)

    def _log_prob(self, x):
        k = self.concentration
        return k * ((x - self.loc).cos() - 1) - math.log(2 * math.pi) - gc.special.i0e(k).log()

    def _sample(self, shape):
        # Best and Fisher (1979): a wrapped-Cauchy envelope, accepted per element. Limits:
        # concentration below _UNIFORM_BELOW is the uniform circle (exp(k cos) = 1 + O(k) is
        # then closer to 1 than float64 resolves), +inf the point mass at loc, NaN gives NaN.
        with no_grad():
            k = self.concentration.expand(tuple(shape)).reshape(-1).to(gc.float64)
            dev = k.device
            out = (2 * gc.rand(k.shape, dtype=gc.float64, device=dev) - 1) * math.pi
            out = gc.where(k == math.inf, gc.zeros_like(k), out)
            out = gc.where(k.isnan(), gc.full_like(k, math.nan), out)
            todo = gc.nonzero((k >= _UNIFORM_BELOW) & (k < math.inf)).reshape(-1)
            # rho of the envelope, (tau - sqrt(2 tau)) / (2k) with tau = 1 + sqrt(1 + 4k^2),
            # rewritten without the cancellation of its numerator at small k
            kk = k[todo]
            s = (1 + 4 * kk * kk).sqrt()
            tau = 1 + s
            rho = 2 * kk * tau / ((s + 1) * (tau + (2 * tau).sqrt()))
            r_all = (1 + rho * rho) / (2 * rho)
            k_all, pos = kk, gc.arange(todo.shape[0], device=dev)
            for _ in range(_MAX_ROUNDS):  # each round accepts >= 66% of what is left
                if not pos.shape[0]:
                    break
                kk, rr = k_all[pos], r_all[pos]
                n = (pos.shape[0],)
                u1, u2, u3 = (gc.rand(n, dtype=gc.float64, device=dev) for _ in range(3))
                z = (math.pi * u1).cos()
                f = (1 + rr * z) / (rr + z)
                c = kk * (rr - f)
                ok = (c * (2 - c) - u2 > 0) | ((c / u2).log() + 1 - c >= 0)
                theta = (u3 - 0.5).sign() * f.clamp(min=-1, max=1).acos()
                out[todo[pos[ok]]] = theta[ok]
                pos = pos[~ok]
            else:
                if pos.shape[0]:
                    raise RuntimeError(
                        f"VonMises.sample(): rejection sampling did not converge in "
                        f"{_MAX_ROUNDS} rounds for concentration {k_all[pos][:4].tolist()}"
                    )
            loc = self.loc.expand(tuple(shape)).reshape(-1).to(gc.float64)
            x = (out + loc + math.pi).remainder(2 * math.pi) - math.pi
            return x.to(self.loc.dtype).reshape(tuple(shape))
