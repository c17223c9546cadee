"""Two families with special numerics: ContinuousBernoulli (whose normaliser needs a series
near probs = 1/2) and VonMises (the circular normal, sampled by Best and Fisher's rejection)."""

from __future__ import annotations

import math

import gpucore as gc
import gpucore.nn.functional as F

from ..autograd.grad_mode import no_grad
from . import constraints as C
from .discrete import _binary
from .distribution import Arg, Declared, Param
from .exp_family import ExponentialFamily

__all__ = ["ContinuousBernoulli", "VonMises"]


class ContinuousBernoulli(ExponentialFamily):
    """ContinuousBernoulli(probs=None, logits=None, lims=(0.499, 0.501)): density
    C(p) p^x (1 - p)^(1 - x) on [0, 1]. Inside ``lims`` the normaliser, mean and variance use
    their Taylor series around p = 1/2, where the closed forms divide 0 by 0."""

    fields = (_binary(), Arg("lims", (0.499, 0.501)))
    support = C.unit_interval
    has_rsample = True

    def _near_half(self):
        return (self.probs > self.lims[0]) & (self.probs < self.lims[1])

    def _away(self):
        """probs moved off the series region (so the closed forms stay finite there)."""
        return gc.where(self._near_half(), gc.full_like(self.probs, self.lims[0]), self.probs)

    def _log_normalizer_value(self):
        p = self._away()
        t = 1 - 2 * p
        closed = (2 * t.atanh()).abs().log() - t.abs().log()
        y = self.probs - 0.5
        series = math.log(2.0) + (4.0 / 3.0) * y.pow(2) + (104.0 / 45.0) * y.pow(4)
        return gc.where(self._near_half(), series, closed)

    @property
    def mean(self):
        p = self._away()
        closed = p / (2 * p - 1) + 1 / (2 * (1 - 2 * p).atanh())
        y = self.probs - 0.5
        return gc.where(self._near_half(), 0.5 + y * (1 / 3 + (16 / 45) * y.pow(2)), closed)

    @property
    def variance(self):
        p = self._away()
        closed = p * (p - 1) / (1 - 2 * p).pow(2) + 1 / (2 * (1 - 2 * p).atanh()).pow(2)
        y2 = (self.probs - 0.5).pow(2)
        return gc.where(self._near_half(), 1 / 12 - y2 * (1 / 15 - (128 / 945) * y2), closed)

    def _rsample(self, shape):
        return self._icdf(self._draw("uniform", shape))

    def _log_prob(self, x):
        return x * self.logits - F.softplus(self.logits) + self._log_normalizer_value()

    def _cdf(self, x):
        p = self._away()
        closed = (p.pow(x) * (1 - p).pow(1 - x) + p - 1) / (2 * p - 1)
        inside = gc.where(self._near_half(), x, closed)
        return gc.where(
            x <= 0, gc.zeros_like(inside), gc.where(x >= 1, gc.ones_like(inside), inside)
        )

    def _icdf(self, u):
        p = self._away()
        closed = ((-p + u * (2 * p - 1)).log1p() - (-p).log1p()) / (p.log() - (-p).log1p())
        return gc.where(self._near_half(), u, closed)

    def entropy(self):
        log0, log1 = (-self.probs).log1p(), self.probs.log()
        return self.mean * (log0 - log1) - self._log_normalizer_value() - log0

    def _natural_params(self):
        return (self.logits,)


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
        # Best and Fisher (1979): a wrapped-Cauchy envelope, accepted per element
        with no_grad():
            k = self.concentration.expand(tuple(shape)).reshape(-1).to(gc.float64)
            tau = 1 + (1 + 4 * k * k).sqrt()
            rho = (tau - (2 * tau).sqrt()) / (2 * k)
            r = (1 + rho * rho) / (2 * rho)
            out = gc.zeros_like(k)
            todo = gc.arange(k.shape[0], device=k.device)
            while todo.shape[0]:
                kk, rr = k[todo], r[todo]
                n = (todo.shape[0],)
                u1, u2, u3 = (gc.rand(n, dtype=gc.float64, device=k.device) for _ in range(3))
                z = (math.pi * u1).cos()
                f = (1 + rr * z) / (rr + z)
                c = kk * (rr - f)
                ok = (c * (2 - c) - u2 > 0) | ((c / u2).log() + 1 - c >= 0)
                theta = (u3 - 0.5).sign() * f.clamp(min=-1, max=1).acos()
                out[todo[ok]] = theta[ok]
                todo = todo[~ok]
            loc = self.loc.expand(tuple(shape)).reshape(-1).to(gc.float64)
            x = (out + loc + math.pi).remainder(2 * math.pi) - math.pi
            return x.to(self.loc.dtype).reshape(tuple(shape))
