"""Continuous scalar families, each a declaration and its formulas: Normal, Uniform, Laplace,
Cauchy, Exponential, Gamma, Chi2, Beta, StudentT, FisherSnedecor, GeneralizedPareto."""

from __future__ import annotations

import math

import gpucore as gc

from . import constraints as C
from .distribution import Declared, Param
from .exp_family import ExponentialFamily
from .gamma import standard_gamma

__all__ = [
    "Normal",
    "Uniform",
    "Laplace",
    "Cauchy",
    "Exponential",
    "Gamma",
    "Chi2",
    "Beta",
    "StudentT",
    "FisherSnedecor",
    "GeneralizedPareto",
]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _nan(like):
    return gc.full_like(like, math.nan)


def _inf(like):
    return gc.full_like(like, math.inf)


class Normal(ExponentialFamily):
    """Normal(loc, scale): the Gaussian with mean ``loc`` and standard deviation ``scale``."""

    fields = (Param("loc", C.real), Param("scale", C.positive))
    support = C.real

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    stddev = property(lambda self: self.scale)
    variance = property(lambda self: self.scale.pow(2))

    def _rsample(self, shape):
        return self.loc + self._draw("normal", shape) * self.scale

    def _log_prob(self, x):
        return -((x - self.loc) ** 2) / (2 * self.scale**2) - self.scale.log() - _LOG_SQRT_2PI

    def _cdf(self, x):
        return 0.5 * (1 + gc.erf((x - self.loc) / (self.scale * math.sqrt(2))))

    def _icdf(self, p):
        return self.loc + self.scale * gc.erfinv(2 * p - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + _LOG_SQRT_2PI + self.scale.log()

    def _natural_params(self):
        return (self.loc / self.scale**2, -0.5 / self.scale**2)

    def _log_normalizer(self, a, b):
        return -0.25 * a * a / b + 0.5 * (-math.pi / b).log()


class Uniform(Declared):
    """Uniform(low, high) on the half-open interval [low, high)."""

    fields = (
        Param("low", lambda d: C.less_than(d.high)),
        Param("high", lambda d: C.greater_than(d.low)),
    )
    has_rsample = True

    @C.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return C.interval(self.low, self.high)

    mean = property(lambda self: (self.high + self.low) / 2)
    mode = property(lambda self: _nan(self.high))
    stddev = property(lambda self: (self.high - self.low) / 12**0.5)
    variance = property(lambda self: (self.high - self.low).pow(2) / 12)

    def _rsample(self, shape):
        return self.low + self._draw("uniform", shape) * (self.high - self.low)

    def _log_prob(self, x):
        inside = (self.low <= x) & (x < self.high)
        return inside.to(self.low.dtype).log() - (self.high - self.low).log()

    def _cdf(self, x):
        return ((x - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def _icdf(self, p):
        return self.low + p * (self.high - self.low)

    def entropy(self):
        return (self.high - self.low).log()


class Laplace(Declared):
    """Laplace(loc, scale): density exp(-|x - loc| / scale) / (2 scale)."""

    fields = (Param("loc", C.real), Param("scale", C.positive))
    support = C.real
    has_rsample = True

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    stddev = property(lambda self: math.sqrt(2) * self.scale)
    variance = property(lambda self: 2 * self.scale.pow(2))

    def _rsample(self, shape):
        # inverse CDF of a uniform on (-1, 1): the end -1 would give an infinite sample
        u = 2 * self._draw("open", shape) - 1
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def _log_prob(self, x):
        return -(2 * self.scale).log() - (x - self.loc).abs() / self.scale

    def _cdf(self, x):
        z = x - self.loc
        return 0.5 - 0.5 * z.sign() * (-z.abs() / self.scale).expm1()

    def _icdf(self, p):
        t = p - 0.5
        return self.loc - self.scale * t.sign() * (-2 * t.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()


class Cauchy(Declared):
    """Cauchy(loc, scale): the Lorentz distribution (no mean, infinite variance)."""

    fields = (Param("loc", C.real), Param("scale", C.positive))
    support = C.real
    has_rsample = True

    mean = property(lambda self: _nan(self.loc))
    mode = property(lambda self: self.loc)
    variance = property(lambda self: _inf(self.loc))

    def _rsample(self, shape):
        return self._icdf(self._draw("open", shape))

    def _log_prob(self, x):
        return -math.log(math.pi) - self.scale.log() - (((x - self.loc) / self.scale) ** 2).log1p()

    def _cdf(self, x):
        return ((x - self.loc) / self.scale).atan() / math.pi + 0.5

    def _icdf(self, p):
        return (math.pi * (p - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class Exponential(ExponentialFamily):
    """Exponential(rate): density rate exp(-rate x) on x >= 0."""

    fields = (Param("rate", C.positive),)
    support = C.nonnegative
    has_rsample = True

    mean = property(lambda self: self.rate.reciprocal())
    mode = property(lambda self: gc.zeros_like(self.rate))
    stddev = property(lambda self: self.rate.reciprocal())
    variance = property(lambda self: self.rate.pow(-2))

    def _rsample(self, shape):
        return -self._draw("open", shape).log() / self.rate

    def _log_prob(self, x):
        return self.rate.log() - self.rate * x

    def _cdf(self, x):
        return 1 - (-self.rate * x).exp()

    def _icdf(self, p):
        return -(-p).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()

    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -(-x).log()


def _gamma_sample(conc, rate, shape):
    x = standard_gamma(conc.expand(shape)) / rate.expand(shape)
    return x.clamp(min=gc.finfo(x.dtype).tiny)


class Gamma(ExponentialFamily):
    """Gamma(concentration, rate): density rate^a x^(a-1) exp(-rate x) / Gamma(a)."""

    fields = (Param("concentration", C.positive), Param("rate", C.positive))
    support = C.nonnegative
    has_rsample = True

    mean = property(lambda self: self.concentration / self.rate)
    mode = property(lambda self: ((self.concentration - 1) / self.rate).clamp(min=0))
    variance = property(lambda self: self.concentration / self.rate.pow(2))

    def _rsample(self, shape):
        return _gamma_sample(self.concentration, self.rate, shape)

    def _log_prob(self, x):
        a, r = self.concentration, self.rate
        return gc.xlogy(a, r) + gc.xlogy(a - 1, x) - r * x - a.lgamma()

    def _cdf(self, x):
        # igamma has no device kernel: its result comes back to the parameters' device
        return gc.special.gammainc(self.concentration, self.rate * x).to(self.rate.device)

    def entropy(self):
        a = self.concentration
        return a - self.rate.log() + a.lgamma() + (1 - a) * a.digamma()

    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return (x + 1).lgamma() + (x + 1) * (-y.reciprocal()).log()


class Chi2(Gamma):
    """Chi2(df): Gamma(df / 2, 1 / 2)."""

    fields = (Param("df", C.positive),)

    def _setup(self):
        self.concentration, self.rate = 0.5 * self.df, gc.full_like(self.df, 0.5)


class Beta(ExponentialFamily):
    """Beta(concentration1, concentration0) on [0, 1]: density x^(a-1) (1-x)^(b-1) / B(a, b)."""

    fields = (Param("concentration1", C.positive), Param("concentration0", C.positive))
    support = C.unit_interval
    has_rsample = True

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        # the Dirichlet rule on (x, 1 - x): a corner when both concentrations are below 1
        a, b = (self.concentration1 - 1).clamp(min=0), (self.concentration0 - 1).clamp(min=0)
        corner = (self.concentration1 > self.concentration0).to(a.dtype)
        both_low = (self.concentration1 < 1) & (self.concentration0 < 1)
        return gc.where(both_low, corner, a / (a + b))

    @property
    def variance(self):
        a, b = self.concentration1, self.concentration0
        t = a + b
        return a * b / (t.pow(2) * (t + 1))

    def _rsample(self, shape):
        ga = standard_gamma(self.concentration1.expand(shape))
        gb = standard_gamma(self.concentration0.expand(shape))
        tiny = gc.finfo(ga.dtype).tiny
        return (ga / (ga + gb)).clamp(min=tiny, max=1 - gc.finfo(ga.dtype).eps / 2)

    def _lbeta(self):
        a, b = self.concentration1, self.concentration0
        return a.lgamma() + b.lgamma() - (a + b).lgamma()

    def _log_prob(self, x):
        a, b = self.concentration1, self.concentration0
        return gc.xlogy(a - 1, x) + gc.special.xlog1py(b - 1, -x) - self._lbeta()

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        return (
            self._lbeta()
            - (a - 1) * a.digamma()
            - (b - 1) * b.digamma()
            + (a + b - 2) * (a + b).digamma()
        )

    def _natural_params(self):
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x, y):
        return x.lgamma() + y.lgamma() - (x + y).lgamma()


class StudentT(Declared):
    """StudentT(df, loc=0, scale=1): Student's t with ``df`` degrees of freedom."""

    fields = (
        Param("df", C.positive),
        Param("loc", C.real, default=0.0),
        Param("scale", C.positive, default=1.0),
    )
    support = C.real
    has_rsample = True

    @property
    def mean(self):
        return gc.where(self.df > 1, self.loc, _nan(self.loc))

    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2)
        return gc.where(df > 2, finite, gc.where(df > 1, _inf(df), _nan(df)))

    def _rsample(self, shape):
        z = self._draw("normal", shape)
        chi2 = _gamma_sample(0.5 * self.df, gc.full_like(self.df, 0.5), shape)
        return self.loc + self.scale * z * (chi2 / self.df).rsqrt()

    def _log_prob(self, x):
        df = self.df
        y = (x - self.loc) / self.scale
        norm = (
            self.scale.log()
            + 0.5 * df.log()
            + 0.5 * math.log(math.pi)
            + (0.5 * df).lgamma()
            - (0.5 * (df + 1)).lgamma()
        )
        return -0.5 * (df + 1) * (y * y / df).log1p() - norm

    def entropy(self):
        df = self.df
        lbeta = (0.5 * df).lgamma() + math.lgamma(0.5) - (0.5 * (df + 1)).lgamma()
        half = 0.5 * (df + 1)
        return (
            self.scale.log()
            + half * (half.digamma() - (0.5 * df).digamma())
            + 0.5 * df.log()
            + lbeta
        )


class FisherSnedecor(Declared):
    """FisherSnedecor(df1, df2): the F distribution, (chi2(df1)/df1) / (chi2(df2)/df2)."""

    fields = (Param("df1", C.positive), Param("df2", C.positive))
    support = C.positive
    has_rsample = True

    @property
    def mean(self):
        d2 = self.df2
        return gc.where(d2 > 2, d2 / (d2 - 2), _nan(d2))

    @property
    def mode(self):
        d1, d2 = self.df1, self.df2
        return gc.where(d1 > 2, (d1 - 2) / d1 * d2 / (d2 + 2), _nan(d1))

    @property
    def variance(self):
        d1, d2 = self.df1, self.df2
        v = 2 * d2.pow(2) * (d1 + d2 - 2) / (d1 * (d2 - 2).pow(2) * (d2 - 4))
        return gc.where(d2 > 4, v, _nan(d2))

    def _rsample(self, shape):
        h1, h2 = 0.5 * self.df1, 0.5 * self.df2
        x = _gamma_sample(h1, h1, shape) / _gamma_sample(h2, h2, shape)
        return x.clamp(min=gc.finfo(x.dtype).tiny)

    def _log_prob(self, x):
        h1, h2 = 0.5 * self.df1, 0.5 * self.df2
        ratio = self.df1 / self.df2
        lnorm = (h1 + h2).lgamma() - h1.lgamma() - h2.lgamma()
        return lnorm + h1 * ratio.log() + (h1 - 1) * x.log() - (h1 + h2) * (ratio * x).log1p()


class GeneralizedPareto(Declared):
    """GeneralizedPareto(loc, scale, concentration): the peaks-over-threshold family; an
    exponential at concentration 0, bounded above for negative concentration."""

    fields = (Param("loc", C.real), Param("scale", C.positive), Param("concentration", C.real))
    has_rsample = True

    @C.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        # [loc, loc - scale / concentration] for negative concentration, [loc, inf) otherwise
        k = self.concentration
        upper = gc.where(k < 0, self.loc - self.scale / self._safe_k(), _inf(k))
        return C.interval(self.loc, upper)

    def _z(self, x):
        return (x - self.loc) / self.scale

    def _safe_k(self):
        k = self.concentration
        return gc.where(k == 0, gc.ones_like(k), k)

    @property
    def mean(self):
        k = self.concentration
        return gc.where(k < 1, self.loc + self.scale / (1 - k), _inf(k))

    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        k = self.concentration
        return gc.where(k < 0.5, self.scale.pow(2) / ((1 - k).pow(2) * (1 - 2 * k)), _inf(k))

    def _rsample(self, shape):
        return self._icdf(self._draw("uniform", shape))

    def _log_prob(self, x):
        z, k = self._z(x), self.concentration
        safe = self._safe_k()
        curved = -(1 + 1 / safe) * (safe * z).log1p()
        lp = gc.where(k == 0, -z, curved) - self.scale.log()
        inside = (z >= 0) & ((k >= 0) | (z <= -1 / safe))
        return gc.where(inside, lp, gc.full_like(lp, -math.inf))

    def _cdf(self, x):
        z, k = self._z(x).clamp(min=0), self.concentration
        safe = self._safe_k()
        curved = 1 - (1 + safe * z).clamp(min=0).pow(-1 / safe)
        return gc.where(k == 0, -(-z).expm1(), curved)

    def _icdf(self, p):
        k, safe = self.concentration, self._safe_k()
        tail = (-p).log1p()
        return self.loc + self.scale * gc.where(k == 0, -tail, (-safe * tail).expm1() / safe)

    def entropy(self):
        return self.scale.log() + self.concentration + 1
